// report.h -- the replay report: a summary table for people, a JSON file for tools.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>

#include "replay.h"

namespace tier::sim {

nlohmann::json ReportJson(const ReplayReport& report);
// Logical bytes written to the cold tier per second of prefill saved (NVMe endurance); 0 when
// nothing was saved. Pure.
double ColdBytesPerSavedSecond(const ReplayReport& report);
// The summary table of one run, or of a run next to its null-provider comparison.
void PrintReport(std::ostream& out, const ReplayReport& report,
                 const ReplayReport* compare = nullptr);
// Writes JSON ({"run": ..., "compare_null": ...} when compared, else the run) to `path` with
// WriteReportText.
Status WriteReportJson(const std::string& path, const ReplayReport& report,
                       const ReplayReport* compare = nullptr);

// Whether `path` can take the report, before a replay: "" (no report) is fine; so is a file that
// exists and is writable (a regular file, /dev/stdout, a pipe), or a new file in a writable
// directory. INVALID_ARGUMENT "--report-json 'PATH': is a directory" (or "the directory 'D' does
// not exist", "cannot write it: ...") otherwise. Any thread.
Status CheckReportPath(const std::string& path);
// Writes `text` to `path` (created 0644 or truncated) and checks every step: each write, and for
// a regular file fsync and close, where a full disk shows. On failure the partial regular file
// is removed; NO_SPACE or IO_ERROR "--report-json 'PATH': write failed: No space left on device
// (errno 28)". Any thread.
Status WriteReportText(const std::string& path, const std::string& text);

}  // namespace tier::sim
