// checker.h -- the invariants every crash state must satisfy, checked by reopening the disk
// provider on it (which runs its recovery) with what the test knows about each checkpoint. The
// power-loss loop and the enumeration share it. A checkpoint is a DerivedCheckpoint of its seed
// (tests/reliability/derived_checkpoint.h): its key and every byte follow from the seed alone.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace tier::powerloss::test {

// What the client (the server using the provider) was told about one checkpoint before the cut.
struct SeedFacts {
  bool began = false;                   // a spill was submitted: it may be visible
  bool spill_synced = false;            // ... with durability=fdatasync
  bool spilled = false;                 // the spill completed OK
  bool removing = false;                // a remove was called
  bool remove_under_fdatasync = false;  // ... with durability=fdatasync (it holds its bytes until
                                        // its unlink is durable)
  bool removed = false;                 // a remove returned OK
  bool remove_synced = false;           // ... with durability=fdatasync
  bool confirmed = false;  // restored whole after an earlier power loss, not removed since
  bool lost = false;       // an unsynced spill counted lost at an earlier power loss
};

struct CheckConfig {
  uint64_t capacity_bytes = 0;
  uint64_t max_segment_bytes = 0;  // of the DerivedCheckpoints
  std::string ns = "powerloss";    // the provider's namespace
  uint64_t chunk_kib = 64;
};

struct CheckResult {
  std::string failure;         // "" when every invariant held; else every violation found
  std::set<uint64_t> whole;    // seeds visible and restored byte-exact
  uint64_t visible = 0;        // checkpoints the reopened provider serves
  uint64_t torn = 0;           // visible but DATA_LOSS at restore (allowed: unsynced spills)
  uint64_t lost_unsynced = 0;  // completed spills under durability=none that are gone
  std::set<uint64_t> lost;     // their seeds
  bool over_capacity = false;  // over capacity, by checkpoints removed under durability=none
  uint64_t quarantined_at_open = 0;
  uint64_t temps_removed_at_open = 0;
};

// Opens the provider on `dir` (recovery), then checks:
//  * recovery finishes: the open succeeds, no temporary file is left;
//  * budget: used bytes equal the checkpoint files' bytes, entries equal the files, and used bytes
//    are within capacity, except for checkpoints removed under durability=none (that remove gives
//    its bytes back at the unlink, which nothing makes durable: a cut can keep a spill that used
//    them and undo the unlink); under fdatasync a remove holds its bytes until its directory sync;
//  * nothing unknown is visible, nothing removed under fdatasync is visible again;
//  * every visible checkpoint restores byte-exact, or (only where its spill was not synced) is
//    DATA_LOSS; never wrong bytes, never another error;
//  * every spill completed under fdatasync, and every checkpoint confirmed earlier, that no remove
//    touched, is visible and whole.
CheckResult CheckCrashState(const std::string& dir, const std::map<uint64_t, SeedFacts>& facts,
                            const CheckConfig& config);

}  // namespace tier::powerloss::test
