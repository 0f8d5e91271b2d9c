// contract_test.cc -- Contract: the metric table in README.md is the contract. It must follow
// Prometheus naming, list every family of abi/tier_metrics.h, and agree in both directions with
// what a live tier-host exposes at /metrics (families, types, label names, label values).
#include <gtest/gtest.h>

#include <algorithm>

#include <regex>
#include <set>
#include <string>

#include "metrics_contract.h"
#include "obs_support.h"
#include "test_support.h"
#include "tier_metrics.h"
#include "tier_provider.h"

namespace tier::obs {
namespace {

using tier::test::ScopedTempDir;

std::vector<ContractRow> ReadmeRows() {
  const std::string section =
      Between(ReadFile(README_PATH), "<!-- metrics-table:begin -->", "<!-- metrics-table:end -->");
  std::vector<std::string> errors;
  std::vector<ContractRow> rows = ParseContractTable(section, &errors);
  for (const std::string& e : errors) ADD_FAILURE() << "README metric table: " << e;
  return rows;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Join(const std::set<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return "{" + text + "}";
}

TEST(Contract, TableFollowsPrometheusNaming) {
  const std::vector<ContractRow> rows = ReadmeRows();
  ASSERT_GE(rows.size(), 20u) << "the README metric table is missing or was not parsed";
  std::set<std::string> names;
  static const std::set<std::string> kForbiddenLabels = {
      "key",       "session", "session_id", "request", "request_id", "id",       "hash",
      "namespace", "dir",     "file",       "user",    "le_",        "instance", "job"};
  static const std::regex kName("[a-z][a-z0-9_]*");
  for (const ContractRow& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(names.insert(row.name).second) << "listed twice";
    EXPECT_TRUE(std::regex_match(row.name, kName)) << "not snake_case";
    EXPECT_TRUE(row.from == "server" || row.from == "provider" || row.from == "library")
        << "from '" << row.from << "'";
    EXPECT_TRUE(row.type == "counter" || row.type == "gauge" || row.type == "histogram" ||
                row.type == "summary")
        << "type '" << row.type << "'";
    EXPECT_FALSE(row.unit.empty());
    EXPECT_GE(row.meaning.size(), 20u) << "say what it means";
    if (row.from == "library") continue;  // prometheus-cpp's own names: documented, not ours
    EXPECT_EQ(row.name.rfind("tier_", 0), 0u) << "one prefix: tier_";
    EXPECT_EQ(row.type == "counter", EndsWith(row.name, "_total"))
        << "counters, and only counters, end in _total";
    for (const char* reserved : {"_count", "_sum", "_bucket"}) {
      EXPECT_FALSE(EndsWith(row.name, reserved)) << "reserved suffix " << reserved;
    }
    const std::string base =
        EndsWith(row.name, "_total") ? row.name.substr(0, row.name.size() - 6) : row.name;
    EXPECT_EQ(EndsWith(base, "_seconds"), row.unit == "seconds") << "unit " << row.unit;
    EXPECT_EQ(EndsWith(base, "_bytes"), row.unit == "bytes") << "unit " << row.unit;
    for (const char* non_base : {"_milliseconds", "_ms", "_kib", "_mib", "_gib", "_kb", "_mb"}) {
      EXPECT_EQ(base.find(non_base), std::string::npos) << "not a base unit";
    }
    EXPECT_EQ(row.from == "provider", row.name.rfind("tier_cold_", 0) == 0)
        << "provider families are the tier_cold_ ones";
    EXPECT_EQ(row.from == "provider", row.values("provider") != nullptr)
        << "provider families, and only they, carry `provider`";
    for (const auto& [label, values] : row.labels) {
      EXPECT_EQ(kForbiddenLabels.count(label), 0u) << "label " << label << " is not a fixed set";
      EXPECT_TRUE(std::regex_match(label, kName)) << label;
      EXPECT_GE(values.size(), 1u) << label << " lists no values";
      EXPECT_LE(values.size(), 16u) << label << " is not a small fixed set";
      EXPECT_EQ(std::set<std::string>(values.begin(), values.end()).size(), values.size())
          << label << " lists a value twice";
    }
  }
}

// Every TIER_METRIC_* of abi/tier_metrics.h is a provider row and every provider row is one of
// them; the label value sets are the ABI's name functions.
TEST(Contract, TableMatchesTheAbiHeader) {
  const std::map<std::string, ContractRow> rows = ContractByName(ReadmeRows());
  const std::string header = ReadFile(TIER_METRICS_HEADER);
  ASSERT_FALSE(header.empty()) << TIER_METRICS_HEADER;
  static const std::regex define(R"re(#define TIER_METRIC_\w+ "(\w+)")re");
  std::set<std::string> abi_names;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), define);
       it != std::sregex_iterator(); ++it) {
    abi_names.insert((*it)[1].str());
  }
  ASSERT_GE(abi_names.size(), 10u);
  std::set<std::string> provider_rows;
  for (const auto& [name, row] : rows) {
    if (row.from == "provider") provider_rows.insert(name);
  }
  EXPECT_EQ(provider_rows, abi_names);

  auto values = [&](const std::string& family, const std::string& label) {
    auto it = rows.find(family);
    const std::vector<std::string>* v = it == rows.end() ? nullptr : it->second.values(label);
    return v == nullptr ? std::set<std::string>{} : std::set<std::string>(v->begin(), v->end());
  };
  std::set<std::string> statuses;
  for (int s = 0; s < TIER_STATUS_COUNT; ++s) statuses.insert(tier_status_name(s));
  for (const char* family :
       {TIER_METRIC_COLD_SPILLS, TIER_METRIC_COLD_RESTORES, TIER_METRIC_COLD_REMOVES}) {
    EXPECT_EQ(values(family, "result"), statuses) << family;
  }
  EXPECT_EQ(values(TIER_METRIC_COLD_DECISIONS, "decision"),
            (std::set<std::string>{tier_decision_name(TIER_DECISION_RESTORE),
                                   tier_decision_name(TIER_DECISION_SKIP_TO_ROOT)}));
  std::set<std::string> reasons;
  for (uint32_t r = 0; r < TIER_REASON_COUNT; ++r) reasons.insert(tier_reason_name(r));
  EXPECT_EQ(values(TIER_METRIC_COLD_DECISIONS, "reason"), reasons);
  EXPECT_EQ(values(TIER_METRIC_COLD_IO_PATH, "path"),
            (std::set<std::string>{TIER_IO_PATH_LIBRADOS, TIER_IO_PATH_IO_URING_DIRECT,
                                   TIER_IO_PATH_IO_URING_BUFFERED, TIER_IO_PATH_THREADS_DIRECT,
                                   TIER_IO_PATH_THREADS_BUFFERED, TIER_IO_PATH_NONE}));
}

// Compares one scrape with the table in both directions; one line per disagreement.
// `all_provider_values`: the provider registers every label value up front (disk), so every
// listed value must be exposed.
std::vector<std::string> Disagreements(const std::map<std::string, ContractRow>& rows,
                                       const std::string& text, const std::string& provider,
                                       bool all_provider_values) {
  std::vector<std::string> out;
  std::vector<std::string> errors;
  const std::map<std::string, Family> families = ParseExposition(text, &errors);
  for (const std::string& e : errors) out.push_back("unreadable exposition: " + e);
  for (const auto& [name, family] : families) {
    auto it = rows.find(name);
    if (it == rows.end()) {
      out.push_back(name + ": exposed but not in the table");
      continue;
    }
    const ContractRow& row = it->second;
    if (family.type != row.type) {
      out.push_back(name + ": exposed as " + family.type + ", listed as " + row.type);
    }
    if (family.samples.empty()) out.push_back(name + ": exposed without series");
    std::set<std::string> listed;
    for (const auto& [label, values] : row.labels) listed.insert(label);
    if (family.label_names() != listed) {
      out.push_back(name + ": exposed labels " + Join(family.label_names()) + ", listed " +
                    Join(listed));
    }
    for (const auto& [label, values] : row.labels) {
      const std::set<std::string> allowed(values.begin(), values.end());
      const std::set<std::string> exposed = family.values(label);
      for (const std::string& value : exposed) {
        if (allowed.count(value) == 0) {
          out.push_back(name + ": " + label + "=\"" + value + "\" exposed but not listed");
        }
      }
      if (label == "provider") {
        if (exposed != std::set<std::string>{provider}) {
          out.push_back(name + ": provider values " + Join(exposed) + ", expected " + provider);
        }
        continue;
      }
      if (row.from == "provider" && !all_provider_values) continue;
      // The I/O path values are per provider: the disk provider's five, the rados one's one.
      if (label == "path" && provider != "rados") {
        std::set<std::string> expected(values.begin(), values.end());
        expected.erase(TIER_IO_PATH_LIBRADOS);
        for (const std::string& value : expected) {
          if (exposed.count(value) == 0) {
            out.push_back(name + ": " + label + "=\"" + value + "\" listed but not exposed");
          }
        }
        continue;
      }
      for (const std::string& value : values) {
        if (exposed.count(value) == 0) {
          out.push_back(name + ": " + label + "=\"" + value + "\" listed but not exposed");
        }
      }
    }
  }
  for (const auto& [name, row] : rows) {
    // A provider family whose `provider` values do not name this provider is another's.
    bool ours = true;
    for (const auto& [label, values] : row.labels) {
      if (label == "provider") {
        ours = std::find(values.begin(), values.end(), provider) != values.end();
      }
    }
    if (ours && families.count(name) == 0) out.push_back(name + ": listed but not exposed");
  }
  return out;
}

void ExpectExpositionMatchesTable(const std::string& text, const std::string& provider,
                                  bool all_provider_values) {
  const std::map<std::string, ContractRow> rows = ContractByName(ReadmeRows());
  ASSERT_GE(rows.size(), 20u);
  std::string report;
  for (const std::string& d : Disagreements(rows, text, provider, all_provider_values)) {
    report += "  " + d + "\n";
  }
  EXPECT_EQ(report, "") << "README metric table and /metrics disagree:\n" << report;
}

void ExpectPromtoolAcceptsIt(const std::string& text, const std::string& dir) {
  ASSERT_STRNE(PROMTOOL, "") << "promtool not found at configure time: install Debian's "
                                "prometheus package (.ci/install-deps.sh) and reconfigure";
  const std::string file = dir + "/exposition.txt";
  ASSERT_TRUE(WriteFile(file, text));
  const RunResult check = Run({PROMTOOL, "check", "metrics"}, file, dir);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "") << "promtool check metrics has remarks";
}

std::vector<std::string> SmallAgentsReplay() {
  return {"--workload", "agents", "--sessions", "6"};
}

TEST(Contract, NullProviderExpositionMatchesTheTable) {
  ScopedTempDir dir("tier-obs");
  LingeringReplay replay(dir.path());
  std::string error;
  ASSERT_TRUE(replay.Start(TIER_HOST,
                           {"--cold-kv-dir", "", "--bytes-scale", "1000", "--device-kv-mib", "2048",
                            "--host-kv-mib", "3072"},
                           0, SmallAgentsReplay(), 180, &error))
      << error;
  const std::string text = replay.Scrape(&error);
  ASSERT_FALSE(text.empty()) << error;
  ExpectExpositionMatchesTable(text, "null", false);
  ExpectPromtoolAcceptsIt(text, dir.path());
  EXPECT_EQ(replay.child().Terminate(), 0) << "a lingering tier-host exits 0 on SIGTERM\n"
                                           << replay.log();
}

TEST(Contract, DiskProviderExpositionMatchesTheTable) {
  const std::string plugin = DiskPluginPath();
  if (plugin.empty()) GTEST_SKIP() << "the disk provider (libtier_disk.so) is not built";
  ScopedTempDir dir("tier-obs");
  LingeringReplay replay(dir.path());
  std::string error;
  ASSERT_TRUE(replay.Start(
      TIER_HOST,
      {"--tier-plugin", plugin, "--cold-kv-dir", dir.path() + "/cold", "--cold-kv-gib", "64",
       "--bytes-scale", "1000", "--device-kv-mib", "2048", "--host-kv-mib", "3072"},
      0, SmallAgentsReplay(), 180, &error))
      << error;
  const std::string text = replay.Scrape(&error);
  ASSERT_FALSE(text.empty()) << error;
  ExpectExpositionMatchesTable(text, "disk", true);
  ExpectPromtoolAcceptsIt(text, dir.path());
  EXPECT_EQ(replay.child().Terminate(), 0) << replay.log();
}

// The comparison itself: a table and an exposition that disagree in either direction are caught.
TEST(Contract, ComparisonCatchesDisagreementsBothWays) {
  std::vector<std::string> errors;
  const auto rows = ContractByName(ParseContractTable(
      "| `tier_cold_x_total` | provider | counter | `provider`: `disk`, `null`; `kind`: `a`, `b` "
      "| ops | Something that happens. |\n"
      "| `tier_h_seconds` | server | histogram | — | seconds | How long something takes. |\n"
      "| `tier_g_bytes` | server | gauge | `tier`: `host`, `cold` | bytes | How big it is. |\n",
      &errors));
  ASSERT_TRUE(errors.empty());
  ASSERT_EQ(rows.size(), 3u);
  ASSERT_NE(rows.at("tier_cold_x_total").values("kind"), nullptr);
  EXPECT_EQ(*rows.at("tier_cold_x_total").values("kind"), (std::vector<std::string>{"a", "b"}));
  const std::string agreeing =
      "# TYPE tier_cold_x_total counter\ntier_cold_x_total{kind=\"a\",provider=\"disk\"} 1\n"
      "tier_cold_x_total{kind=\"b\",provider=\"disk\"} 0\n"
      "# TYPE tier_h_seconds histogram\ntier_h_seconds_bucket{le=\"1\"} 1\n"
      "tier_h_seconds_bucket{le=\"+Inf\"} 1\ntier_h_seconds_count 1\ntier_h_seconds_sum 0.5\n"
      "# TYPE tier_g_bytes gauge\ntier_g_bytes{tier=\"host\"} 1\ntier_g_bytes{tier=\"cold\"} 2\n";
  EXPECT_EQ(Disagreements(rows, agreeing, "disk", true), std::vector<std::string>{});
  // Exposed but not listed: a family, a label value, a label name; the wrong type or provider.
  const std::string extra =
      agreeing +
      "# TYPE tier_other_total counter\ntier_other_total 1\n"
      "# TYPE tier_cold_x_total counter\ntier_cold_x_total{kind=\"c\",provider=\"disk\"} 1\n";
  const auto extra_found = Disagreements(rows, extra, "disk", true);
  EXPECT_EQ(extra_found.size(), 2u) << ::testing::PrintToString(extra_found);
  const auto wrong_provider = Disagreements(rows, agreeing, "null", true);
  EXPECT_EQ(wrong_provider.size(), 1u) << ::testing::PrintToString(wrong_provider);
  std::string retyped = ReplaceAll(agreeing, "tier_g_bytes gauge", "tier_g_bytes counter");
  retyped =
      ReplaceAll(retyped, "tier_g_bytes{tier=\"cold\"} 2", "tier_g_bytes{tier=\"cold\",x=\"y\"} 2");
  EXPECT_EQ(Disagreements(rows, retyped, "disk", true).size(), 2u);
  // Listed but not exposed: a family, a server label value; provider values only when complete.
  std::string missing = ReplaceAll(agreeing, "tier_g_bytes{tier=\"cold\"} 2\n", "");
  missing = ReplaceAll(missing, "tier_cold_x_total{kind=\"b\",provider=\"disk\"} 0\n", "");
  EXPECT_EQ(Disagreements(rows, missing, "disk", true).size(), 2u);
  EXPECT_EQ(Disagreements(rows, missing, "disk", false).size(), 1u);
  const std::string no_histogram = missing.substr(0, missing.find("# TYPE tier_h_seconds"));
  EXPECT_EQ(Disagreements(rows, no_histogram, "disk", false).size(), 2u);
}

}  // namespace
}  // namespace tier::obs
