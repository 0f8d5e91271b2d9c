// The power-loss loop's parent: mounts the fault filesystem once, then per round starts the
// worker, lets the filesystem stop at a random mutating call, kills the worker, rebuilds the
// directory as after a power loss and checks the crash state against the worker's journal.
#include "powerloss_loop.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "checker.h"
#include "fault_fs.h"

namespace tier::powerloss::test {
namespace {

constexpr auto kRoundLimit = std::chrono::seconds(60);  // a round that reaches no cut fails

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// posix_spawn (vfork-like): the parent's memory, which holds the filesystem's images and log, is
// not copied for every worker.
pid_t StartWorker(const PowerLossConfig& config, const std::vector<std::string>& args) {
  const std::string err_path = config.root + "/worker.stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(config.self_exe.c_str()));
  static char flag[] = "--powerloss-worker";
  argv.push_back(flag);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc =
      ::posix_spawn(&pid, config.self_exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Reads the journal lines appended since `*offset` into `facts`. Returns what they show that is
// already a violation (a DATA_LOSS the worker met on a synced spill), or "".
std::string ReadJournal(const std::string& path, size_t* offset,
                        std::map<uint64_t, SeedFacts>* facts, bool* opened,
                        PowerLossTotals* totals) {
  const std::string text = ReadFile(path);
  std::istringstream in(text.substr(std::min(*offset, text.size())));
  *offset = text.size();
  std::string line, problems;
  while (std::getline(in, line)) {
    char what = 0;
    unsigned long long seed = 0;
    int flag = 0;
    if (std::sscanf(line.c_str(), "%c %llu %d", &what, &seed, &flag) < 2) continue;
    SeedFacts& f = (*facts)[seed];
    switch (what) {
      case 'O':
        *opened = true;
        facts->erase(0);
        break;
      case 'B':
        f.began = true;
        f.spill_synced = flag == 1;
        break;
      case 'S':
        f.spilled = true;
        ++totals->spills_completed;
        totals->spills_synced += f.spill_synced;
        break;
      case 'R':
        f.removing = true;
        f.remove_under_fdatasync = flag == 1;
        break;
      case 'X':
        f.removed = true;
        f.remove_synced = flag == 1;
        ++totals->removes_completed;
        break;
      case 'D':
        if (f.spill_synced || f.confirmed) {
          problems += "the worker restored seed " + std::to_string(seed) +
                      " as DATA_LOSS although it was " + (f.confirmed ? "seen whole" : "synced") +
                      "; ";
        }
        break;
      default:
        break;
    }
  }
  return problems;
}

struct RoundPlan {
  std::vector<std::string> args;
  uint64_t cut_after = 0, fates_seed = 0;
  std::string Describe(uint64_t round, uint64_t loop_seed) const {
    return "round " + std::to_string(round) + " (loop seed " + std::to_string(loop_seed) +
           "; durability=" + args[4] + " compression=" + args[5] + " " + args[6] +
           "; cut at mutating call " + std::to_string(cut_after) + ")";
  }
};

RoundPlan PlanRound(const PowerLossConfig& config, uint64_t round, std::mt19937_64& rng,
                    const std::string& tier_dir, const std::string& journal) {
  static const char* const kCompressions[] = {"off", "auto", "zstd"};
  RoundPlan plan;
  plan.args = {tier_dir,
               journal,
               std::to_string((round + 1) << 32),
               std::to_string(rng()),
               rng() % 4 == 0 ? "none" : "fdatasync",
               kCompressions[rng() % 3],
               rng() % 2 == 0 ? "io_uring" : "threads",
               std::to_string(config.capacity_bytes),
               std::to_string(config.max_segment_bytes)};
  plan.cut_after = 1 + rng() % config.max_ops_per_round;
  plan.fates_seed = rng();
  return plan;
}

// Runs the worker until the filesystem stops, then kills it. "" or why the round failed.
std::string RunToCut(const PowerLossConfig& config, FaultFs& fs, const RoundPlan& plan) {
  fs.ArmCut(plan.cut_after);
  const pid_t pid = StartWorker(config, plan.args);
  if (pid < 0) return "fork failed";
  const auto deadline = std::chrono::steady_clock::now() + kRoundLimit;
  bool exited = false, cut = false;
  int status = 0;
  while (!cut && !exited && std::chrono::steady_clock::now() < deadline) {
    cut = fs.WaitForCut(std::chrono::milliseconds(50));
    exited = !cut && ::waitpid(pid, &status, WNOHANG) == pid;
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    fs.Drain();  // the killed worker's waiting calls are answered; it can exit
    ::waitpid(pid, &status, 0);
  } else {
    fs.Drain();
  }
  if (exited) {
    return "the worker ended on its own (status " + std::to_string(status) +
           "): " + ReadFile(config.root + "/worker.stderr");
  }
  if (!cut) return "no cut within " + std::to_string(kRoundLimit.count()) + " s";
  return "";
}

// Files set aside are never read again ("empty it at will"): the loop empties quarantine/ through
// the mount before each round, durably, so the directory does not grow with every cut.
std::string EmptyQuarantine(FaultFs& fs, const std::string& tier_dir) {
  const std::string q = tier_dir + "/quarantine";
  struct stat st {};
  if (::lstat(q.c_str(), &st) != 0) return "";
  if (std::string why = EmptyDirectory(q); !why.empty()) return why;
  return fs.SyncAll();
}

void Add(PowerLossTotals* t, const CheckResult& c, const FaultFs::PowerLossResult& r) {
  ++t->cuts;
  t->ops_logged += r.cut_ops;
  t->pending_at_cut += r.pending_ops;
  t->restores_checked += c.visible;
  t->torn += c.torn;
  t->lost_unsynced += c.lost_unsynced;
  t->quarantined_at_open += c.quarantined_at_open;
  t->temps_removed_at_open += c.temps_removed_at_open;
  t->over_capacity += c.over_capacity;
}

// The state a generation of rounds shares: one tier directory, created by its first round's
// worker (so that creating it is cut too), and what the journal said about its checkpoints.
struct Generation {
  uint64_t number = 0;
  std::string rel;  // "g<number>/tier", relative to the mount and to the check directory
  std::map<uint64_t, SeedFacts> facts;
};

// Starts generation `number`: the previous generation's directories are removed (durably).
std::string NewGeneration(FaultFs& fs, uint64_t number, Generation* g) {
  if (g->number != 0 || !g->rel.empty()) {
    const std::string old = fs.mountpoint() + "/g" + std::to_string(g->number);
    if (std::string why = EmptyDirectory(old); !why.empty()) return why;
    if (::rmdir(old.c_str()) != 0) return "rmdir " + old;
    if (std::string why = fs.SyncAll(); !why.empty()) return why;
  }
  g->number = number;
  g->rel = "g" + std::to_string(number) + "/tier";
  g->facts.clear();
  return "";
}

// One round: run to the cut, lose power, check. "" or the failure.
std::string RunRound(const PowerLossConfig& config, FaultFs& fs, uint64_t round,
                     std::mt19937_64& rng, Generation& g, size_t* journal_offset,
                     PowerLossTotals* totals) {
  const std::string journal = config.root + "/journal", check = config.root + "/check";
  const RoundPlan plan = PlanRound(config, round, rng, fs.mountpoint() + "/" + g.rel, journal);
  const std::string where = plan.Describe(round, config.seed) + ": ";
  if (std::string why = EmptyQuarantine(fs, fs.mountpoint() + "/" + g.rel); !why.empty()) {
    return where + "emptying quarantine/: " + why;
  }
  if (std::string why = RunToCut(config, fs, plan); !why.empty()) return where + why;
  const FaultFs::PowerLossResult r = fs.PowerLoss(plan.fates_seed);
  bool opened = false;
  std::string problems = ReadJournal(journal, journal_offset, &g.facts, &opened, totals);
  totals->cuts_during_open += !opened;
  if (!r.error.empty()) problems += "rebuilding the directory: " + r.error + "; ";
  if (std::string why = Materialize(r.image, check); !why.empty()) problems += why + "; ";
  CheckConfig check_config;
  check_config.capacity_bytes = config.capacity_bytes;
  check_config.max_segment_bytes = config.max_segment_bytes;
  const CheckResult c = CheckCrashState(check + "/" + g.rel, g.facts, check_config);
  Add(totals, c, r);
  problems += c.failure;
  if (!problems.empty()) {
    return where + r.description + ": " + problems + "\nnot durable at the cut:\n" + r.pending;
  }
  for (uint64_t seed : c.whole) g.facts[seed].confirmed = true;
  for (uint64_t seed : c.lost) g.facts[seed].lost = true;
  return "";
}

}  // namespace

std::string PowerLossTotals::Summary() const {
  std::ostringstream s;
  s << cuts << " cuts (" << cuts_during_open << " during the worker's open and recovery), "
    << ops_logged << " mutating calls before them, " << pending_at_cut
    << " not yet durable at their cut; " << spills_completed << " spills completed ("
    << spills_synced << " synced), " << removes_completed << " removes, " << restores_checked
    << " restores checked after cuts, " << torn << " torn unsynced checkpoints found DATA_LOSS, "
    << lost_unsynced << " unsynced completed spills lost, " << quarantined_at_open
    << " files quarantined and " << temps_removed_at_open
    << " temporary files removed by recovery; " << over_capacity
    << " cuts left the directory over capacity by removes under durability=none";
  return s.str();
}

PowerLossTotals RunPowerLossLoop(const PowerLossConfig& config) {
  PowerLossTotals totals;
  const std::string backing = config.root + "/backing", mnt = config.root + "/mnt";
  for (const std::string& d : {backing, mnt, config.root + "/check"}) ::mkdir(d.c_str(), 0700);
  std::string error;
  std::unique_ptr<FaultFs> fs = FaultFs::Mount(backing, mnt, &error);
  if (!fs) {
    totals.failure = error;
    return totals;
  }
  std::mt19937_64 rng(config.seed);
  Generation g;
  size_t journal_offset = 0;
  for (uint64_t round = 0; round < config.cuts; ++round) {
    if (round % config.rounds_per_directory == 0) {
      if (std::string why = NewGeneration(*fs, round / config.rounds_per_directory + 1, &g);
          !why.empty()) {
        totals.failure = "starting a fresh directory: " + why;
        return totals;
      }
    }
    totals.failure = RunRound(config, *fs, round, rng, g, &journal_offset, &totals);
    if (!totals.failure.empty()) return totals;
    if (config.progress && (round + 1) % 1000 == 0) {
      std::printf("power-loss loop: %llu of %llu cuts verified\n",
                  static_cast<unsigned long long>(round + 1),
                  static_cast<unsigned long long>(config.cuts));
      std::fflush(stdout);
    }
  }
  return totals;
}

}  // namespace tier::powerloss::test
