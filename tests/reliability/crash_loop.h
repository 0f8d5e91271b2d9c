// crash_loop.h -- the crash loop: a worker process spills and removes derived checkpoints through
// the disk provider in a loop and is killed with SIGKILL at a random moment; the parent reopens the
// directory and checks that what is visible is exactly what may be visible, byte for byte.
#pragma once

#include <cstdint>
#include <string>

namespace tier::disk::test {

struct CrashLoopConfig {
  std::string root;      // scratch directory: the tier lives in root/tier, the journal beside it
  std::string self_exe;  // this executable (runs the worker with --crash-worker)
  uint64_t seed = 1;     // drives kill times and every worker's choices
  int kills = 30;
  uint64_t max_segment_bytes = 768u << 10;
  bool progress = false;  // print a line every 25 kills
};

struct CrashLoopResult {
  std::string failure;              // "" when every round verified; else the first failure, naming
                                    // the round and the loop seed that reproduces it
  uint64_t completed_spills = 0;    // spills the journal shows completed, over all rounds
  uint64_t spills_cut_by_kill = 0;  // spills submitted but not completed when a kill landed
  uint64_t removes = 0;             // removes that returned OK
};

// Runs `config.kills` kill/reopen/verify rounds.
CrashLoopResult RunCrashLoop(const CrashLoopConfig& config);

// Entry point of the worker process: argv after "--crash-worker". Never returns normally (it loops
// until killed); returns an exit status when it cannot run.
int CrashWorkerMain(int argc, char** argv);

}  // namespace tier::disk::test
