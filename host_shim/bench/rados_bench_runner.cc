#include "rados_bench_runner.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "subprocess.h"

namespace tier::bench {
namespace {

std::vector<std::string> BaseArgs(const RadosBenchJob& job) {
  std::vector<std::string> argv = {job.rados};
  if (!job.conf.empty()) argv.insert(argv.end(), {"--conf", job.conf});
  if (!job.client.empty()) argv.insert(argv.end(), {"--id", job.client});
  if (!job.keyring.empty()) argv.insert(argv.end(), {"--keyring", job.keyring});
  argv.insert(argv.end(), {"-p", job.pool, "-N", job.rados_namespace});
  if (job.inflight_op_bytes > 0) {
    argv.push_back("--objecter_inflight_op_bytes=" + std::to_string(job.inflight_op_bytes));
  }
  return argv;
}

// rados bench prints its figures as strings ("bandwidth":"192.18").
double Number(const nlohmann::json& doc, const char* key) {
  const nlohmann::json& v = doc.at(key);
  return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>();
}

}  // namespace

Result<std::string> RadosVersion(const std::string& rados) {
  Result<Captured> run = RunCaptured({rados, "--version"});
  if (!run.ok() || run.value().exit_code != 0) {
    return Status(TIER_UNSUPPORTED, "rados not installed");
  }
  std::string version = run.value().out;
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  return version;
}

Result<RadosBenchResult> RunRadosBench(const RadosBenchJob& job) {
  std::vector<std::string> argv = BaseArgs(job);
  const uint64_t objects =
      std::max<uint64_t>(1, (job.bytes + job.object_bytes - 1) / job.object_bytes);
  // Time-bounded by rados itself: 600 s is far above any run here; the object count ends it.
  argv.insert(argv.end(),
              {"bench", "600", job.write ? "write" : "seq", "-t", std::to_string(job.concurrency),
               "--run-name", job.run_name, "--format", "json"});
  if (job.write) {
    argv.insert(argv.end(),
                {"-b", std::to_string(job.object_bytes), "-O", std::to_string(job.object_bytes),
                 "--max-objects", std::to_string(objects), "--no-cleanup"});
  }
  RadosBenchResult result;
  result.command = JoinCommand(argv);
  Result<Captured> run = RunCaptured(argv);
  if (!run.ok()) return run.status();
  const Captured& c = run.value();
  if (c.exit_code != 0) {
    return Status(TIER_IO_ERROR, "rados bench exited with " + std::to_string(c.exit_code) + ": " +
                                     c.err.substr(0, 400) + " (command: " + result.command + ")");
  }
  try {
    const size_t start = c.out.find('{');
    const nlohmann::json doc =
        nlohmann::json::parse(c.out.substr(start == std::string::npos ? 0 : start));
    const double ops = Number(doc, job.write ? "total_writes_made" : "total_reads_made");
    const double size = Number(doc, job.write ? "write_size" : "read_size");
    const double seconds = Number(doc, "total_time_run");
    result.bytes = static_cast<uint64_t>(ops * size);
    result.bytes_per_second = seconds > 0 ? ops * size / seconds : 0;
  } catch (const std::exception& e) {
    return Status(TIER_IO_ERROR, std::string("cannot read rados bench's JSON output: ") + e.what() +
                                     " (command: " + result.command + ")");
  }
  if (result.bytes == 0 || result.bytes_per_second <= 0) {
    return Status(TIER_IO_ERROR, "rados bench moved no bytes (command: " + result.command + ")");
  }
  return result;
}

Status CleanupRadosBench(const RadosBenchJob& job) {
  std::vector<std::string> argv = BaseArgs(job);
  argv.insert(argv.end(), {"cleanup", "--run-name", job.run_name});
  Result<Captured> run = RunCaptured(argv);
  if (!run.ok()) return run.status();
  if (run.value().exit_code != 0) {
    return Status(TIER_IO_ERROR, "rados cleanup: " + run.value().err.substr(0, 200));
  }
  return Status::Ok();
}

}  // namespace tier::bench
