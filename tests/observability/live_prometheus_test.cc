// live_prometheus_test.cc -- LivePrometheus: a real Prometheus (Debian's package) on loopback
// scrapes a `tier-host replay --linger --wait-for-scrape` in progress, loads
// dashboards/tier-alerts.yaml, and then every dashboard panel query and every alert expression is
// evaluated through its HTTP API. One process runs the whole suite (one Prometheus, one replay);
// everything it starts is stopped in TearDownTestSuite, by the Child destructors, or by
// PR_SET_PDEATHSIG if it dies.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "metrics_contract.h"
#include "obs_support.h"
#include "test_support.h"

namespace tier::obs {
namespace {

using nlohmann::json;
using tier::test::ScopedTempDir;

const std::string kDashboard = std::string(DASHBOARDS_DIR) + "/tier-cold-tier.json";
const std::string kRules = std::string(DASHBOARDS_DIR) + "/tier-alerts.yaml";

// What each panel must show for the agents replay with the disk provider: a positive value
// somewhere (it measures activity) or zero everywhere (errors of a healthy tier). Every panel of
// the dashboard needs an entry here, so a new panel needs a decision.
enum class Expect { kPositive, kZero };
const std::map<std::string, Expect>& PanelExpectations() {
  static const std::map<std::string, Expect> expectations = {
      {"Cold hit ratio", Expect::kPositive},
      {"Prefill seconds saved", Expect::kPositive},
      {"Cold occupancy", Expect::kPositive},
      {"Cold entries", Expect::kPositive},
      {"Compression ratio", Expect::kPositive},
      {"I/O path", Expect::kPositive},
      {"Spill and restore rate", Expect::kPositive},
      {"Spill and restore throughput", Expect::kPositive},
      {"Restore latency p50/p95/p99", Expect::kPositive},
      {"Spill latency p50/p95/p99", Expect::kPositive},
      {"Restore decisions by reason", Expect::kPositive},
      {"Admissions by outcome", Expect::kPositive},
      {"Root prefills by reason", Expect::kPositive},
      {"Prefill seconds saved per second", Expect::kPositive},
      {"Time to first token p50/p99", Expect::kPositive},
      {"Cold used vs capacity", Expect::kPositive},
      {"Cold entries: provider vs catalog", Expect::kPositive},
      {"Compression ratio over time", Expect::kPositive},
      {"Catalog bytes by tier", Expect::kPositive},
      {"Transitions between tiers", Expect::kPositive},
      {"Errors by kind", Expect::kZero},
      {"Data loss and mismatches", Expect::kZero},
  };
  return expectations;
}

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Wall-clock seconds since the epoch: Prometheus's sample timestamps, on this machine's clock.
double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct QueryResult {
  bool ok = false;
  std::string error;
  std::vector<std::pair<json, double>> series;  // labels, value
};

class LivePrometheus : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const double started = Seconds();
    setup_error_ = new std::string();
    dir_ = new ScopedTempDir("tier-obs-prom");
    if (std::string(PROMETHEUS).empty() || std::string(PROMTOOL).empty()) {
      *setup_error_ =
          "prometheus/promtool not found at configure time: install Debian's "
          "prometheus package (.ci/install-deps.sh) and reconfigure";
      return;
    }
    disk_plugin_ = new std::string(DiskPluginPath());
    // Another provider (the rados one, on the ctest fixture's cluster): its server flags, one a
    // line, in TIER_OBS_SERVER_ARGS (tests/rados/run-live-prometheus.sh sets them).
    const char* other = std::getenv("TIER_OBS_SERVER_ARGS");
    const std::string dir = dir_->path();
    metrics_port_ = FreeLoopbackPort();
    prometheus_port_ = FreeLoopbackPort();
    instance_ = new std::string("127.0.0.1:" + std::to_string(metrics_port_));
    // Scrape every second; rules evaluated every second; the tier-host port is fixed up front so
    // Prometheus is already scraping when tier-host opens it.
    const std::string config =
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "rule_files:\n  - " +
        kRules +
        "\n"
        "scrape_configs:\n  - job_name: tier\n    static_configs:\n"
        "      - targets: ['" +
        *instance_ + "']\n";
    WriteFile(dir + "/prometheus.yml", config);
    prometheus_ = new Child();
    std::string error;
    if (!prometheus_->Start({PROMETHEUS, "--config.file=" + dir + "/prometheus.yml",
                             "--storage.tsdb.path=" + dir + "/tsdb",
                             "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port_),
                             "--log.level=warn"},
                            dir + "/prometheus.out", dir + "/prometheus.err", &error)) {
      *setup_error_ = error;
      return;
    }
    const bool ready = WaitFor(
        [] {
          return !prometheus_->running() || HttpGet(prometheus_port_, "/-/ready", 2).status == 200;
        },
        90, 0.2);
    if (!ready || !prometheus_->running()) {
      *setup_error_ = "Prometheus did not become ready:\n" + ReadFile(dir + "/prometheus.err");
      return;
    }
    // The replay: held until Prometheus has scraped every series at zero, then kept up.
    std::vector<std::string> server;
    if (other != nullptr && *other != '\0') {
      std::istringstream lines(other);
      for (std::string arg; std::getline(lines, arg);) server.push_back(arg);
    } else if (!disk_plugin_->empty()) {
      server = {"--tier-plugin", *disk_plugin_,   "--cold-kv-dir",
                dir + "/cold",   "--cold-kv-gib", "64"};
    } else {
      server = {"--cold-kv-dir", ""};
    }
    for (const char* a :
         {"--bytes-scale", "1000", "--device-kv-mib", "2048", "--host-kv-mib", "3072"}) {
      server.push_back(a);
    }
    replay_ = new LingeringReplay(dir);
    replay_started_ = Seconds();
    if (!replay_->Start(TIER_HOST, server, metrics_port_,
                        {"--workload", "agents", "--sessions", "6", "--wait-for-scrape", "120",
                         // model: restore-or-root by the modelled cost, not by a probe of a
                         // disk that a loaded CI machine makes look slow (then nothing restores)
                         "--restore-cost", "model"},
                        240, &error)) {
      *setup_error_ = error + "\n--- prometheus stderr\n" + ReadFile(dir + "/prometheus.err");
      return;
    }
    // The replay is lingering: every value is final from here on. A Prometheus scrape that
    // starts after this instant holds the same values as the exposition read next.
    const double final_unix_s = UnixSeconds();
    exposition_ = new std::string(replay_->Scrape(&error));
    if (exposition_->empty()) {
      *setup_error_ = error;
      return;
    }
    std::vector<std::string> parse_errors;
    const auto families = ParseExposition(*exposition_, &parse_errors);
    families_ = new std::map<std::string, Family>(families);
    // Wait until Prometheus holds the final values: its latest scrape began after the replay
    // ended (the last admission alone is not enough: spills and removes land after it).
    const double admissions =
        families.count("tier_admissions_total")
            ? families.at("tier_admissions_total").sum("tier_admissions_total")
            : -1;
    const std::string target = "{job=\"tier\",instance=\"" + *instance_ + "\"}";
    const bool caught_up = WaitFor(
        [&] {
          const QueryResult scraped = Query("timestamp(up" + target + ")");
          if (!scraped.ok || scraped.series.size() != 1) return false;
          if (scraped.series[0].second <= final_unix_s) return false;
          QueryResult r = Query("sum(tier_admissions_total" + target + ")");
          return r.ok && r.series.size() == 1 && r.series[0].second == admissions;
        },
        90, 0.25);
    if (!caught_up) {
      *setup_error_ = "Prometheus never saw the final tier_admissions_total (" +
                      std::to_string(admissions) + ")\n" + Logs();
      return;
    }
    setup_seconds_ = Seconds() - started;
  }

  static void TearDownTestSuite() {
    if (replay_ != nullptr) replay_->child().Terminate();
    if (prometheus_ != nullptr) prometheus_->Terminate();
    delete replay_;
    delete prometheus_;
    delete exposition_;
    delete families_;
    delete instance_;
    delete disk_plugin_;
    delete dir_;  // after the processes: removes the TSDB and the cold directory
    delete setup_error_;
    replay_ = nullptr;
    prometheus_ = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ(*setup_error_, "") << "setting up Prometheus and the replay failed";
  }

  static std::string Logs() {
    return (replay_ != nullptr ? replay_->log() : std::string()) + "--- prometheus stderr\n" +
           ReadFile(dir_->path() + "/prometheus.err");
  }

  static QueryResult Query(const std::string& promql) {
    QueryResult result;
    const HttpResponse response =
        HttpGet(prometheus_port_, "/api/v1/query?query=" + UrlEncode(promql), 30);
    const json body = json::parse(response.body, nullptr, false);
    if (response.status != 200 || body.is_discarded() || body.value("status", "") != "success") {
      result.error = "HTTP " + std::to_string(response.status) + " " + response.error + " " +
                     response.body.substr(0, 500);
      return result;
    }
    result.ok = true;
    const json& data = body["data"];
    auto value = [](const json& pair) { return std::stod(pair[1].get<std::string>()); };
    if (data["resultType"] == "vector") {
      for (const json& s : data["result"])
        result.series.emplace_back(s["metric"], value(s["value"]));
    } else if (data["resultType"] == "scalar") {
      result.series.emplace_back(json::object(), value(data["result"]));
    } else {
      result.ok = false;
      result.error = "unexpected result type " + data["resultType"].dump();
    }
    return result;
  }

  // A panel query as Grafana would send it for this instance: the instance variable as an
  // escaped regex, interval variables as a window that covers the whole replay.
  static std::string Substitute(const std::string& expr) {
    const int window_s = static_cast<int>(Seconds() - replay_started_) + 30;
    const std::string window = std::to_string(window_s) + "s";
    std::string out = expr;
    for (const char* name : {"${__rate_interval}", "$__rate_interval", "${__range}", "$__range"}) {
      out = ReplaceAll(out, name, window);
    }
    out = ReplaceAll(out, "${__interval}", "1s");
    out = ReplaceAll(out, "$__interval", "1s");
    const std::string escaped = ReplaceAll(*instance_, ".", "\\\\.");
    out = ReplaceAll(out, "${instance}", escaped);
    out = ReplaceAll(out, "$instance", escaped);
    return out;
  }

  static double Sum(const std::string& family, const std::string& label = "",
                    const std::set<std::string>& values = {}) {
    auto it = families_->find(family);
    if (it == families_->end()) return 0;
    double total = 0;
    for (const Sample& s : it->second.samples) {
      if (s.name != family) continue;
      if (!label.empty() && (s.labels.count(label) == 0 || values.count(s.labels.at(label)) == 0)) {
        continue;
      }
      total += s.value;
    }
    return total;
  }

  static inline std::string* setup_error_ = nullptr;
  static inline ScopedTempDir* dir_ = nullptr;
  static inline Child* prometheus_ = nullptr;
  static inline LingeringReplay* replay_ = nullptr;
  static inline std::string* exposition_ = nullptr;
  static inline std::map<std::string, Family>* families_ = nullptr;
  static inline std::string* instance_ = nullptr;
  static inline std::string* disk_plugin_ = nullptr;
  static inline int metrics_port_ = 0;
  static inline int prometheus_port_ = 0;
  static inline double replay_started_ = 0;
  static inline double setup_seconds_ = 0;
};

TEST_F(LivePrometheus, ScrapesTheReplayFromZeroAndPromtoolAcceptsTheExposition) {
  std::cout << "[ info ] Prometheus " << PROMETHEUS << " on port " << prometheus_port_
            << ", tier-host (" << (disk_plugin_->empty() ? "null" : "disk") << " provider) on port "
            << metrics_port_ << ", ready in " << setup_seconds_ << " s\n";
  const QueryResult up = Query("up{job=\"tier\"}");
  ASSERT_TRUE(up.ok) << up.error;
  ASSERT_EQ(up.series.size(), 1u);
  EXPECT_EQ(up.series[0].second, 1);
  EXPECT_EQ(up.series[0].first.value("instance", ""), *instance_);
  // --wait-for-scrape: Prometheus recorded the counters at zero before the replay moved them.
  const QueryResult before = Query("min_over_time(tier_admissions_total{instance=\"" + *instance_ +
                                   "\",outcome=\"root_prefill\"}[10m])");
  ASSERT_TRUE(before.ok) << before.error;
  ASSERT_EQ(before.series.size(), 1u);
  EXPECT_EQ(before.series[0].second, 0) << "the first scrape came after the replay started";
  // promtool check metrics on the same exposition.
  const std::string file = dir_->path() + "/exposition.txt";
  ASSERT_TRUE(WriteFile(file, *exposition_));
  const RunResult check = tier::obs::Run({PROMTOOL, "check", "metrics"}, file, dir_->path());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "") << "promtool check metrics has remarks";
}

TEST_F(LivePrometheus, InstanceVariableFindsTheServer) {
  const HttpResponse r = HttpGet(prometheus_port_, "/api/v1/label/instance/values?match[]=" +
                                                       UrlEncode("tier_admissions_total"));
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = json::parse(r.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded());
  EXPECT_EQ(body["data"], json::array({*instance_}))
      << "label_values(tier_admissions_total, instance)";
}

TEST_F(LivePrometheus, EveryPanelReturnsDataForTheReplay) {
  const json dashboard = json::parse(ReadFile(kDashboard), nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded());
  const bool disk = !disk_plugin_->empty();
  std::set<std::string> seen;
  int queries = 0;
  for (const json& panel : dashboard["panels"]) {
    if (panel.value("type", "") == "row") continue;
    const std::string title = panel.value("title", "");
    SCOPED_TRACE("panel '" + title + "'");
    seen.insert(title);
    auto expectation = PanelExpectations().find(title);
    ASSERT_NE(expectation, PanelExpectations().end())
        << "add the panel to PanelExpectations (positive or zero for a healthy replay)";
    bool any_positive = false, any_nonzero = false, any_series = false;
    std::string shown;
    for (const json& target : panel["targets"]) {
      const std::string expr = Substitute(target.value("expr", ""));
      ASSERT_EQ(expr.find('$'), std::string::npos) << "unsubstituted variable in " << expr;
      const QueryResult r = Query(expr);
      ++queries;
      ASSERT_TRUE(r.ok) << expr << "\n" << r.error;
      if (disk) {
        EXPECT_FALSE(r.series.empty()) << "no data: " << expr;
      }
      for (const auto& [labels, value] : r.series) {
        any_series = true;
        if (disk) {
          EXPECT_TRUE(std::isfinite(value)) << labels << " = " << value << ": " << expr;
        }
        any_positive = any_positive || value > 0;
        any_nonzero = any_nonzero || value != 0;
        shown += "\n  " + target.value("refId", "") + " " + labels.dump() + " = " +
                 std::to_string(value);
      }
    }
    std::cout << "[ panel ] " << title << ":" << (shown.empty() ? " (no data)" : shown) << "\n";
    if (!disk)
      continue;  // the null provider: the queries run; the cold panels have nothing to show
    EXPECT_TRUE(any_series);
    if (expectation->second == Expect::kPositive) {
      EXPECT_TRUE(any_positive) << "expected activity for this workload:" << shown;
    } else {
      EXPECT_FALSE(any_nonzero) << "expected zero on a healthy replay:" << shown;
    }
  }
  EXPECT_GE(queries, 20);
  for (const auto& [title, expectation] : PanelExpectations()) {
    EXPECT_EQ(seen.count(title), 1u)
        << "PanelExpectations names a panel the dashboard lacks: " << title;
  }
  if (!disk) GTEST_SKIP() << "no disk provider built: panel values checked only with it";
}

TEST_F(LivePrometheus, AlertRulesLoadEvaluateAndAgreeWithTheExposition) {
  // Prometheus loaded every rule of the file and evaluates it without error.
  const auto rules = RuleExpressions(ReadFile(kRules));
  ASSERT_GE(rules.size(), 4u);
  std::string last;
  const bool healthy = WaitFor(
      [&] {
        const HttpResponse r = HttpGet(prometheus_port_, "/api/v1/rules?type=alert");
        const json body = json::parse(r.body, nullptr, false);
        if (r.status != 200 || body.is_discarded()) return false;
        std::set<std::string> ok;
        last.clear();
        for (const json& g : body["data"]["groups"]) {
          for (const json& rule : g["rules"]) {
            last += rule.value("name", "") + ": " + rule.value("health", "") + " " +
                    rule.value("lastError", "") + "\n";
            if (rule.value("health", "") == "ok") ok.insert(rule.value("name", ""));
          }
        }
        return ok.size() == rules.size();
      },
      60, 0.5);
  EXPECT_TRUE(healthy) << "rules not all loaded and healthy:\n" << last;

  // Each alert's expression, through the HTTP API, returns a result exactly when the exposition
  // says it should (ignoring `for:`).
  const double used = Sum("tier_cold_used_bytes"), capacity = Sum("tier_cold_capacity_bytes");
  const double cost = Sum("tier_cold_restore_decisions_total", "reason", {"cost"});
  const double cheaper = Sum("tier_cold_restore_decisions_total", "reason", {"cheaper"});
  const std::set<std::string> failures = {"io_error", "internal", "invalid_argument",
                                          "unsupported"};
  const double errors = Sum("tier_cold_spills_total", "result", failures) +
                        Sum("tier_cold_restores_total", "result", failures) +
                        Sum("tier_cold_removes_total", "result", failures);
  struct Expected {
    bool fires;
    bool certain;  // false near a threshold, where rate() extrapolation decides
  };
  const double skipped = cheaper + cost > 0 ? cost / (cheaper + cost) : 0;
  const std::map<std::string, Expected> expected = {
      {"TierColdTierNearlyFull", {capacity > 0 && used / capacity > 0.95, true}},
      {"TierColdCorruptReads", {Sum("tier_cold_data_loss_total") > 0, true}},
      {"TierRestoreMismatch",
       {Sum("tier_restore_verifications_total", "result", {"mismatch"}) > 0, true}},
      {"TierColdRestoresMostlySkipped",
       {skipped > 0.5 && cheaper + cost >= 10,
        std::abs(skipped - 0.5) > 0.05 && std::abs(cheaper + cost - 10) > 2}},
      {"TierColdProviderErrors", {errors > 0, true}},
  };
  for (const auto& [alert, expr] : rules) {
    SCOPED_TRACE("alert " + alert);
    auto want = expected.find(alert);
    ASSERT_NE(want, expected.end()) << "add an expectation for this alert";
    const QueryResult r = Query(expr);
    ASSERT_TRUE(r.ok) << expr << "\n" << r.error;
    if (!want->second.certain) continue;
    EXPECT_EQ(!r.series.empty(), want->second.fires)
        << expr << "\nreturned " << r.series.size() << " series; the exposition says it should "
        << (want->second.fires ? "" : "not ") << "fire";
  }
  // Data loss, mismatches and provider errors are bugs: a healthy replay has none.
  EXPECT_FALSE(expected.at("TierColdCorruptReads").fires);
  EXPECT_FALSE(expected.at("TierRestoreMismatch").fires);
  EXPECT_FALSE(expected.at("TierColdProviderErrors").fires);
}

// Last: the lingering tier-host still serves /metrics now, and exits 0 on SIGTERM.
TEST_F(LivePrometheus, LingeringTierHostServesUntilSigterm) {
  std::string error;
  EXPECT_FALSE(replay_->Scrape(&error).empty()) << error;
  EXPECT_TRUE(replay_->child().running());
  EXPECT_EQ(replay_->child().Terminate(30), 0) << Logs();
}

}  // namespace
}  // namespace tier::obs
