// bench_run.h -- one tier-bench run: builds the checkpoint shape, opens the provider through the
// ABI, and for each data kind runs `repeats` interleaved rounds. A round spills with every
// contestant (fio write, naive peer, provider), evicts the page cache, then restores with every
// contestant (fio read, naive peer, provider) and checks the restored bytes; the order of the
// contestants rotates from round to round so that drift on a shared disk is spread over all.
// Finally the provider's peak memory is measured in a child process (memory_probe.h).
#pragma once

#include <ostream>

#include <tier/status.h>
#include "bench_config.h"
#include "bench_result.h"

namespace tier::bench {

// Runs everything `config` asks for; progress lines go to `progress`. The files it writes live
// in a fresh `config.dir`/tier-bench-<pid> directory, removed at the end unless keep_files.
Result<BenchResult> RunBench(const BenchConfig& config, const std::string& self_exe,
                             std::ostream& progress);

}  // namespace tier::bench
