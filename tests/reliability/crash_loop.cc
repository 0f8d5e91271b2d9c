// The crash loop's parent: starts the worker, kills it with SIGKILL after a random delay, then
// reopens the directory and checks it against the worker's journal.
#include "crash_loop.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "derived_checkpoint.h"

namespace tier::disk::test {
namespace {

// What the journal says about one seed (its last spill and remove records).
struct SeedState {
  bool began = false, spilled = false, failed = false, removing = false, removed = false;
};

std::map<uint64_t, SeedState> ReadJournal(const std::string& path) {
  std::map<uint64_t, SeedState> seeds;
  std::ifstream in(path);
  char what = 0;
  unsigned long long seed = 0;
  while (in >> what >> seed) {
    SeedState& s = seeds[seed];
    switch (what) {
      case 'B':
        s.began = true;
        break;
      case 'S':
        s.spilled = true;
        break;
      case 'F':
        s.failed = true;
        break;
      case 'R':
        s.removing = true;
        break;
      case 'X':
        s.removed = true;
        break;
      default:
        break;
    }
  }
  return seeds;
}

// Kills the worker (if still running) when a round ends early.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts the worker with its stderr in root/worker.stderr.
pid_t StartWorker(const CrashLoopConfig& config, const std::vector<std::string>& args) {
  const std::string err_path = config.root + "/worker.stderr";
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) ::dup2(fd, 2);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(config.self_exe.c_str()));
  static char flag[] = "--crash-worker";
  argv.push_back(flag);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(config.self_exe.c_str(), argv.data());
  ::_exit(127);
}

// Reopens the directory after a kill and checks every promise. "" when all hold.
std::string VerifyAfterKill(const CrashLoopConfig& config) {
  const std::string dir = config.root + "/tier";
  const std::map<uint64_t, SeedState> journal = ReadJournal(config.root + "/journal");
  FakeHost host;
  auto opened = OpenDisk(host, "crash-loop", BaseOptions(dir, 48ull << 20));
  if (!opened.ok()) return "reopen failed: " + opened.status().message();
  DiskProvider& p = *opened.value();
  std::ostringstream why;
  if (p.quarantined_at_open() != 0) {
    why << p.quarantined_at_open() << " checkpoint(s) failed verification at open (torn by a "
        << "process crash); ";
  }
  if (!ListDir(dir + "/quarantine").empty()) why << "quarantine/ is not empty; ";
  uint64_t ckpt_files = 0;
  for (const std::string& n : ListDir(dir)) {
    if (n.find(".tmp") != std::string::npos) why << "temporary file left after open: " << n << "; ";
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0) ++ckpt_files;
  }
  tier_stats st{};
  st.struct_size = sizeof(st);
  if (!p.Stats(&st).ok()) why << "stats failed; ";
  if (st.used_bytes != SumCheckpointFileBytes(dir)) {
    why << "used_bytes " << st.used_bytes << " but the files hold " << SumCheckpointFileBytes(dir)
        << "; ";
  }
  if (st.entries != ckpt_files) why << st.entries << " entries but " << ckpt_files << " files; ";

  struct Seen {
    std::map<uint64_t, std::string> problems;  // seed -> problem ("" = fine)
    uint64_t max_segment_bytes;
    int foreign = 0;
  } seen{{}, config.max_segment_bytes, 0};
  if (!p.Enumerate(
            [](void* user, const tier_entry* e) -> int32_t {
              auto* s = static_cast<Seen*>(user);
              uint64_t seed = 0;
              if (!SeedOfKey(e->key, &seed)) {
                ++s->foreign;
                return 0;
              }
              const Checkpoint cp = DerivedCheckpoint(seed, s->max_segment_bytes);
              std::string problem;
              if (!LayoutMatches(cp, e->segments, e->segment_count))
                problem = "segment table differs";
              if (e->logical_bytes != cp.logical_bytes()) problem += " logical bytes differ";
              s->problems[seed] = problem;
              return 0;
            },
            &seen)
           .ok())
    why << "enumerate failed; ";
  if (seen.foreign) why << seen.foreign << " enumerated keys were never written by the worker; ";
  for (const auto& [seed, problem] : seen.problems) {
    const auto it = journal.find(seed);
    if (it == journal.end() || !it->second.began) {
      why << "seed " << seed << " is visible but was never spilled; ";
      continue;
    }
    if (it->second.removed) why << "seed " << seed << " was removed but is visible again; ";
    if (!problem.empty()) why << "seed " << seed << ": " << problem << "; ";
    const std::string restored = RestoreAndCompare(p, seed, config.max_segment_bytes, seed % 3);
    if (!restored.empty()) why << restored << "; ";
  }
  for (const auto& [seed, s] : journal) {
    if (s.spilled && !s.removing && seen.problems.count(seed) == 0) {
      why << "seed " << seed << " completed its spill but is gone after the kill; ";
    }
  }
  return why.str();
}

}  // namespace

CrashLoopResult RunCrashLoop(const CrashLoopConfig& config) {
  CrashLoopResult result;
  std::mt19937_64 rng(config.seed);
  const char* durabilities[] = {"none", "fdatasync"};
  const char* compressions[] = {"off", "auto", "zstd"};
  for (int round = 0; round < config.kills; ++round) {
    const uint64_t seed_base = (static_cast<uint64_t>(round) + 1) << 32;
    const std::vector<std::string> args = {config.root,
                                           std::to_string(seed_base),
                                           std::to_string(rng()),
                                           durabilities[rng() % 2],
                                           compressions[rng() % 3],
                                           std::to_string(config.max_segment_bytes)};
    // A quarter of the kills land in the first 60 ms (open: probe, directory scan, removal of
    // leftovers); the rest anywhere in the first 400 ms of spilling and removing.
    const uint64_t delay_us = rng() % 4 == 0 ? rng() % 60'000 : rng() % 400'000;
    ChildGuard child;
    child.pid = StartWorker(config, args);
    if (child.pid < 0) {
      result.failure = "fork failed";
      return result;
    }
    const timespec delay{static_cast<time_t>(delay_us / 1'000'000),
                         static_cast<long>(delay_us % 1'000'000) * 1000};
    ::nanosleep(&delay, nullptr);
    ::kill(child.pid, SIGKILL);
    int wstatus = 0;
    ::waitpid(child.pid, &wstatus, 0);
    child.pid = -1;
    const std::string where = "round " + std::to_string(round) + " (loop seed " +
                              std::to_string(config.seed) + ", kill after " +
                              std::to_string(delay_us) + " us, durability=" + args[3] +
                              ", compression=" + args[4] + "): ";
    if (!WIFSIGNALED(wstatus) || WTERMSIG(wstatus) != SIGKILL) {
      result.failure = where + "the worker ended on its own (status " + std::to_string(wstatus) +
                       "): " + ReadFile(config.root + "/worker.stderr");
      return result;
    }
    const std::string problems = VerifyAfterKill(config);
    if (!problems.empty()) {
      result.failure = where + problems;
      return result;
    }
    if (config.progress && (round + 1) % 25 == 0) {
      std::printf("crash loop: %d of %d kills verified\n", round + 1, config.kills);
      std::fflush(stdout);
    }
  }
  for (const auto& [seed, s] : ReadJournal(config.root + "/journal")) {
    result.completed_spills += s.spilled;
    result.spills_cut_by_kill += s.began && !s.spilled && !s.failed;
    result.removes += s.removed;
  }
  return result;
}

}  // namespace tier::disk::test
