#include "fio_runner.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "subprocess.h"

namespace tier::bench {

Result<std::string> FioVersion(const std::string& fio) {
  Result<Captured> run = RunCaptured({fio, "--version"});
  if (!run.ok() || run.value().exit_code != 0) {
    return Status(TIER_UNSUPPORTED, "fio not installed");
  }
  std::string version = run.value().out;
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  return version;
}

Result<FioResult> RunFio(const FioJob& job) {
  const uint64_t mib = (job.bytes + (1u << 20) - 1) >> 20;
  std::vector<std::string> argv = {
      job.fio,
      std::string("--name=tier-bench-") + (job.write ? "write" : "read"),
      "--filename=" + job.file,
      std::string("--rw=") + (job.write ? "write" : "read"),
      "--bs=1M",
      "--size=" + std::to_string(mib) + "M",
      "--direct=1",
      "--ioengine=io_uring",
      "--iodepth=" + std::to_string(job.queue_depth),
      "--numjobs=1",
      "--output-format=json"};
  if (job.write) argv.push_back("--end_fsync=1");
  FioResult result;
  result.command = JoinCommand(argv);
  const auto t0 = std::chrono::steady_clock::now();
  Result<Captured> run = RunCaptured(argv);
  result.wall_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  if (!run.ok()) return run.status();
  const Captured& c = run.value();
  if (c.exit_code != 0) {
    return Status(TIER_IO_ERROR, "fio exited with " + std::to_string(c.exit_code) + ": " +
                                     c.err.substr(0, 400) + " (command: " + result.command + ")");
  }
  try {
    // fio may print notes before the JSON document.
    const size_t start = c.out.find('{');
    const nlohmann::json doc =
        nlohmann::json::parse(c.out.substr(start == std::string::npos ? 0 : start));
    const nlohmann::json& side = doc.at("jobs").at(0).at(job.write ? "write" : "read");
    result.bytes = side.at("io_bytes").get<uint64_t>();
    result.bytes_per_second = side.at("bw_bytes").get<double>();
  } catch (const std::exception& e) {
    return Status(TIER_IO_ERROR, std::string("cannot read fio's JSON output: ") + e.what());
  }
  if (result.bytes == 0 || result.bytes_per_second <= 0) {
    return Status(TIER_IO_ERROR, "fio moved no bytes (command: " + result.command + ")");
  }
  return result;
}

}  // namespace tier::bench
