// run_dirs.h -- the cold directories compare-policies makes for its runs (DIR/compare-POLICY-SIZE).
// It creates each one itself, with a marker file naming it as the owner; a directory of that name
// that it did not create is refused, never emptied. It removes only directories with its marker,
// and only while it holds the disk provider's lock on them (flock on the directory), so a server
// using one keeps it. Main thread.
#pragma once

#include <filesystem>

#include <tier/status.h>

namespace tier {

inline constexpr const char* kRunDirMarker = ".tier-compare-policies";

// A fresh, empty run directory (its marker aside) at `dir`: created (mode 0700; its parent too
// when missing), or one left by an interrupted compare-policies emptied. INVALID_ARGUMENT naming
// `dir` when something else is there, BUSY when a server holds it.
Status MakeRunDirectory(const std::filesystem::path& dir);
// Removes a run directory MakeRunDirectory made, under its lock. BUSY when a server holds it,
// INVALID_ARGUMENT when it has no marker (then nothing is removed).
Status RemoveRunDirectory(const std::filesystem::path& dir);

}  // namespace tier
