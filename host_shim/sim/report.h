// report.h -- the replay report: a summary table for people, a JSON file for tools.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>

#include "replay.h"

namespace tier::sim {

nlohmann::json ReportJson(const ReplayReport& report);
// The summary table of one run, or of a run next to its null-provider comparison.
void PrintReport(std::ostream& out, const ReplayReport& report,
                 const ReplayReport* compare = nullptr);
// Writes JSON ({"run": ..., "compare_null": ...} when compared, else the run) to `path`.
Status WriteReportJson(const std::string& path, const ReplayReport& report,
                       const ReplayReport* compare = nullptr);

}  // namespace tier::sim
