// powerloss_loop.h -- the power-loss loop: a worker process spills, restores and removes
// DerivedCheckpoints through the disk provider on the fault filesystem; the filesystem stops at a
// random mutating call (the cut), the worker is killed with SIGKILL, the directory is rebuilt as a
// power loss leaves it, and the crash state is checked (checker.h) against the worker's journal.
// The next round's worker opens the provider on what is left (its recovery runs on the fault
// filesystem too, and may itself be cut).
#pragma once

#include <cstdint>
#include <string>

namespace tier::powerloss::test {

struct PowerLossConfig {
  std::string root;      // scratch: backing/, mnt/, check/, the journal, the worker's stderr
  std::string self_exe;  // this executable (runs the worker with --powerloss-worker)
  uint64_t seed = 1;     // every choice: workload, cut points, what each cut keeps
  uint64_t cuts = 1000;
  uint64_t capacity_bytes = 640u << 10;
  uint64_t max_segment_bytes = 96u << 10;
  uint64_t max_ops_per_round = 120;    // the cut falls on mutating call 1..this of a round
  uint64_t rounds_per_directory = 50;  // then a fresh directory: creating it is cut too
  bool progress = false;               // a line every 1,000 cuts (and the soak's summary)
};

struct PowerLossTotals {
  std::string failure;  // "" when every cut verified; else the first failure, with its replay
  uint64_t cuts = 0;
  uint64_t cuts_during_open = 0;  // the worker had not finished opening (recovery, probe)
  uint64_t ops_logged = 0;        // mutating calls the filesystem answered before the cuts
  uint64_t pending_at_cut = 0;    // of those, not durable at their cut
  uint64_t spills_completed = 0, spills_synced = 0, removes_completed = 0, restores_checked = 0;
  uint64_t torn = 0;           // visible after a cut but DATA_LOSS (unsynced spills only)
  uint64_t lost_unsynced = 0;  // completed unsynced spills a cut took away
  uint64_t quarantined_at_open = 0, temps_removed_at_open = 0;
  uint64_t over_capacity = 0;  // cuts after which a remove not yet durable had come back
  std::string Summary() const;
};

PowerLossTotals RunPowerLossLoop(const PowerLossConfig& config);

// The worker process: argv after "--powerloss-worker". Loops until killed; returns an exit status
// only when it cannot go on (it then says why on stderr).
int PowerLossWorkerMain(int argc, char** argv);

}  // namespace tier::powerloss::test
