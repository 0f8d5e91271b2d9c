// dashboard_test.cc -- Dashboard: the Grafana JSON model in dashboards/ is loadable by a current
// Grafana (structure Grafana needs, datasource and instance variables, every panel bound to the
// datasource variable, ids and layout), covers what the issue asks, and only queries metrics,
// labels and label values of the README contract; the alert rules do the same, and the README
// describes every panel and alert.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "metrics_contract.h"
#include "obs_support.h"

namespace tier::obs {
namespace {

using nlohmann::json;

const std::string kDashboard = std::string(DASHBOARDS_DIR) + "/tier-cold-tier.json";
const std::string kRules = std::string(DASHBOARDS_DIR) + "/tier-alerts.yaml";

json LoadDashboard() {
  const std::string text = ReadFile(kDashboard);
  EXPECT_FALSE(text.empty()) << kDashboard;
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// Every panel, rows' nested panels included.
std::vector<json> AllPanels(const json& dashboard) {
  std::vector<json> panels;
  for (const json& p : dashboard.value("panels", json::array())) {
    panels.push_back(p);
    for (const json& nested : p.value("panels", json::array())) panels.push_back(nested);
  }
  return panels;
}

std::vector<std::pair<std::string, std::string>> PanelExpressions(const json& dashboard) {
  std::vector<std::pair<std::string, std::string>> exprs;
  for (const json& p : AllPanels(dashboard)) {
    for (const json& t : p.value("targets", json::array())) {
      exprs.emplace_back(p.value("title", ""), t.value("expr", ""));
    }
  }
  return exprs;
}

TEST(Dashboard, JsonModelIsCurrentWithDatasourceAndInstanceVariables) {
  const json d = LoadDashboard();
  ASSERT_FALSE(d.is_discarded()) << kDashboard << " is not valid JSON";
  EXPECT_GE(d.value("schemaVersion", 0), 36) << "a current Grafana schema";
  EXPECT_FALSE(d.value("uid", "").empty());
  EXPECT_LE(d.value("uid", "").size(), 40u) << "Grafana's uid limit";
  EXPECT_FALSE(d.value("title", "").empty());
  EXPECT_TRUE(d.contains("time") && d["time"].contains("from"));
  EXPECT_TRUE(d["id"].is_null()) << "provisioned dashboards carry no database id";
  ASSERT_TRUE(d.contains("templating") && d["templating"].contains("list"));
  const json& vars = d["templating"]["list"];
  const json* datasource = nullptr;
  const json* instance = nullptr;
  for (const json& v : vars) {
    if (v.value("name", "") == "datasource") datasource = &v;
    if (v.value("name", "") == "instance") instance = &v;
  }
  ASSERT_NE(datasource, nullptr) << "a `datasource` variable";
  EXPECT_EQ(datasource->value("type", ""), "datasource");
  EXPECT_EQ(datasource->value("query", ""), "prometheus");
  ASSERT_NE(instance, nullptr) << "an `instance` variable";
  EXPECT_EQ(instance->value("type", ""), "query");
  EXPECT_EQ((*instance)["datasource"], (json{{"type", "prometheus"}, {"uid", "${datasource}"}}));
  const json& query = (*instance)["query"];
  const std::string text = query.is_string() ? query.get<std::string>() : query.value("query", "");
  EXPECT_NE(text.find("label_values("), std::string::npos) << text;
  EXPECT_NE(text.find("instance)"), std::string::npos) << text;
  EXPECT_TRUE(instance->value("includeAll", false) && instance->value("multi", false))
      << "several servers at once";
}

TEST(Dashboard, EveryPanelIsBoundToTheDatasourceVariableAndLaidOut) {
  const json d = LoadDashboard();
  ASSERT_FALSE(d.is_discarded());
  const json datasource = {{"type", "prometheus"}, {"uid", "${datasource}"}};
  static const std::set<std::string> kTypes = {"row",      "timeseries",    "stat",     "gauge",
                                               "bargauge", "table",         "piechart", "text",
                                               "heatmap",  "state-timeline"};
  std::set<int> ids;
  std::set<std::string> titles;
  std::vector<json> cells;  // gridPos of every panel, for the overlap check
  int queried = 0;
  for (const json& p : AllPanels(d)) {
    const std::string title = p.value("title", "");
    SCOPED_TRACE("panel '" + title + "'");
    ASSERT_TRUE(p.contains("id") && p["id"].is_number_integer());
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate id " << p["id"];
    EXPECT_FALSE(title.empty());
    EXPECT_TRUE(titles.insert(title).second) << "duplicate title";
    EXPECT_EQ(kTypes.count(p.value("type", "")), 1u) << p.value("type", "");
    ASSERT_TRUE(p.contains("gridPos"));
    const json& g = p["gridPos"];
    for (const char* k : {"h", "w", "x", "y"})
      ASSERT_TRUE(g.contains(k) && g[k].is_number_integer()) << k;
    EXPECT_GE(g["x"].get<int>(), 0);
    EXPECT_GT(g["w"].get<int>(), 0);
    EXPECT_GT(g["h"].get<int>(), 0);
    EXPECT_LE(g["x"].get<int>() + g["w"].get<int>(), 24) << "Grafana's grid is 24 wide";
    cells.push_back(g);
    if (p.value("type", "") == "row") continue;
    EXPECT_EQ(p["datasource"], datasource) << "bound to ${datasource}";
    EXPECT_GE(p.value("description", "").size(), 20u) << "say what healthy looks like";
    ASSERT_TRUE(p.contains("targets") && p["targets"].is_array() && !p["targets"].empty());
    std::set<std::string> ref_ids;
    for (const json& t : p["targets"]) {
      EXPECT_FALSE(t.value("expr", "").empty());
      EXPECT_EQ(t["datasource"], datasource);
      EXPECT_TRUE(ref_ids.insert(t.value("refId", "")).second) << "duplicate refId";
      ++queried;
    }
  }
  EXPECT_GE(queried, 20);
  for (size_t a = 0; a < cells.size(); ++a) {
    for (size_t b = a + 1; b < cells.size(); ++b) {
      const json &p = cells[a], &q = cells[b];
      const bool apart = p["x"].get<int>() + p["w"].get<int>() <= q["x"].get<int>() ||
                         q["x"].get<int>() + q["w"].get<int>() <= p["x"].get<int>() ||
                         p["y"].get<int>() + p["h"].get<int>() <= q["y"].get<int>() ||
                         q["y"].get<int>() + q["h"].get<int>() <= p["y"].get<int>();
      EXPECT_TRUE(apart) << "panels overlap: " << p << " and " << q;
    }
  }
}

// What the issue asks to see, each as a pattern some panel query must match.
TEST(Dashboard, CoversTheIssuesList) {
  const json d = LoadDashboard();
  ASSERT_FALSE(d.is_discarded());
  std::string all;
  for (const auto& [title, expr] : PanelExpressions(d)) all += expr + "\n";
  const std::vector<std::pair<std::string, std::string>> wanted = {
      {"spill rate", R"(rate\(tier_cold_spills_total)"},
      {"restore rate", R"(rate\(tier_cold_restores_total)"},
      {"spill throughput", R"(rate\(tier_cold_spill_bytes_total)"},
      {"restore throughput", R"(rate\(tier_cold_restore_bytes_total)"},
      {"restore p50",
       R"(histogram_quantile\(0\.5, [^\n]*tier_cold_restore_duration_seconds_bucket)"},
      {"restore p95",
       R"(histogram_quantile\(0\.95, [^\n]*tier_cold_restore_duration_seconds_bucket)"},
      {"restore p99",
       R"(histogram_quantile\(0\.99, [^\n]*tier_cold_restore_duration_seconds_bucket)"},
      {"decision mix by reason",
       R"(by \(decision, reason\) \(rate\(tier_cold_restore_decisions_total)"},
      {"cold used", R"(tier_cold_used_bytes)"},
      {"cold capacity", R"(tier_cold_capacity_bytes)"},
      {"cold entries", R"(tier_cold_entries)"},
      {"compression ratio", R"(kind="logical"[^\n]*/[^\n]*kind="stored")"},
      {"data loss", R"(tier_cold_data_loss_total)"},
      {"I/O and no-space errors", R"(tier_cold_spills_total\{[^}]*result!~"ok\|already_exists")"},
      {"catalog bytes by tier", R"(by \(tier\) \(tier_catalog_bytes)"},
      {"transitions between tiers", R"(by \(from, to\) \(rate\(tier_transitions_total)"},
      {"prefill seconds saved", R"(tier_prefill_saved_seconds_total)"},
  };
  for (const auto& [what, pattern] : wanted) {
    EXPECT_TRUE(std::regex_search(all, std::regex(pattern)))
        << "no panel shows " << what << " (/" << pattern << "/)";
  }
}

// Checks every selector of `expr` against the contract; one line per problem.
std::vector<std::string> CheckAgainstContract(const std::string& where, const std::string& expr,
                                              const std::map<std::string, ContractRow>& rows,
                                              bool needs_instance_filter) {
  std::vector<std::string> problems;
  const std::vector<Selector> selectors = Selectors(expr);
  if (selectors.empty()) problems.push_back(where + ": no metric in " + expr);
  std::set<std::string> labels_in_use;
  for (const Selector& s : selectors) {
    std::vector<std::string> families;
    if (s.metric.find_first_of("(|") != std::string::npos) {  // {__name__=~"a|b"}
      const std::regex name_re(s.metric);
      for (const auto& [name, row] : rows) {
        if (std::regex_match(name, name_re)) families.push_back(name);
      }
      if (families.empty()) problems.push_back(where + ": " + s.metric + " matches no metric");
    } else {
      const std::string family = FamilyOf(s.metric, rows);
      if (rows.count(family) == 0) {
        problems.push_back(where + ": " + s.metric + " is not in the README metric table");
        continue;
      }
      families.push_back(family);
    }
    bool has_instance = false;
    for (const auto& [label, value] : s.matchers) {
      if (label == "__name__") continue;
      if (label == "instance") {
        has_instance = value == "$instance";
        continue;
      }
      for (const std::string& family : families) {
        const std::vector<std::string>* values = rows.at(family).values(label);
        if (values == nullptr) {
          problems.push_back(where + ": " + family + " has no label " + label);
          continue;
        }
        // Every literal alternative of the matcher must be a listed value.
        static const std::regex bar(R"(\|)");
        for (const std::string& alt : std::vector<std::string>(
                 std::sregex_token_iterator(value.begin(), value.end(), bar, -1),
                 std::sregex_token_iterator())) {
          if (std::find(values->begin(), values->end(), alt) == values->end()) {
            problems.push_back(where + ": " + family + "{" + label + "} has no value '" + alt +
                               "'");
          }
        }
      }
    }
    if (needs_instance_filter && !has_instance) {
      problems.push_back(where + ": " + s.text + " lacks instance=~\"$instance\"");
    }
    for (const std::string& family : families) {
      for (const auto& [label, values] : rows.at(family).labels) labels_in_use.insert(label);
    }
  }
  // Labels an expression creates itself: label_replace(v, "dst", "replacement", "src", "regex").
  static const std::regex created(
      R"re(,\s*"(\w+)"\s*,\s*"[^"]*"\s*,\s*"[^"]*"\s*,\s*"[^"]*"\s*\))re");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), created);
       it != std::sregex_iterator(); ++it) {
    labels_in_use.insert((*it)[1].str());
  }
  for (const std::string& label : GroupingLabels(expr)) {
    if (label != "le" && label != "instance" && label != "job" && labels_in_use.count(label) == 0) {
      problems.push_back(where + ": groups by " + label + ", which no metric of it carries");
    }
  }
  return problems;
}

std::map<std::string, ContractRow> Contract() {
  std::vector<std::string> errors;
  return ContractByName(ParseContractTable(
      Between(ReadFile(README_PATH), "<!-- metrics-table:begin -->", "<!-- metrics-table:end -->"),
      &errors));
}

TEST(Dashboard, QueriesOnlyMetricsLabelsAndValuesOfTheContract) {
  const json d = LoadDashboard();
  ASSERT_FALSE(d.is_discarded());
  const auto rows = Contract();
  ASSERT_GE(rows.size(), 20u);
  std::string report;
  for (const auto& [title, expr] : PanelExpressions(d)) {
    for (const std::string& p : CheckAgainstContract("panel '" + title + "'", expr, rows, true)) {
      report += "  " + p + "\n";
    }
  }
  EXPECT_EQ(report, "") << report;
  // The checker itself: a typo in a label value, a metric or a label is caught.
  EXPECT_EQ(CheckAgainstContract(
                "t", R"(rate(tier_cold_spills_total{instance=~"$instance",result="io-error"}[5m]))",
                rows, true)
                .size(),
            1u);
  EXPECT_EQ(CheckAgainstContract("t", R"(tier_cold_spill_total{instance=~"$instance"})", rows, true)
                .size(),
            1u);
  EXPECT_EQ(CheckAgainstContract("t", R"(sum by (reason) (tier_cold_entries))", rows, true).size(),
            2u);
}

TEST(Rules, QueryOnlyMetricsLabelsAndValuesOfTheContract) {
  const auto rules = RuleExpressions(ReadFile(kRules));
  ASSERT_GE(rules.size(), 4u) << kRules;
  const auto rows = Contract();
  std::string report;
  for (const auto& [alert, expr] : rules) {
    for (const std::string& p : CheckAgainstContract("alert " + alert, expr, rows, false)) {
      report += "  " + p + "\n";
    }
  }
  EXPECT_EQ(report, "") << report;
}

TEST(Readme, DescribesEveryPanelAndAlert) {
  const std::string section =
      Between(ReadFile(README_PATH), "<!-- dashboards:begin -->", "<!-- dashboards:end -->");
  ASSERT_FALSE(section.empty()) << "README.md lacks the dashboards section";
  const json d = LoadDashboard();
  ASSERT_FALSE(d.is_discarded());
  for (const json& p : AllPanels(d)) {
    if (p.value("type", "") == "row") continue;
    const std::string title = p.value("title", "");
    const size_t at = section.find("**" + title + "**");
    ASSERT_NE(at, std::string::npos) << "README: no paragraph on panel **" << title << "**";
    const std::string paragraph = section.substr(at, section.find("\n\n", at) - at);
    EXPECT_NE(paragraph.find("Healthy"), std::string::npos)
        << "README: the paragraph on " << title << " should say what healthy looks like";
    EXPECT_NE(paragraph.find("Unhealthy"), std::string::npos)
        << "README: the paragraph on " << title << " should say what unhealthy looks like";
  }
  for (const auto& [alert, expr] : RuleExpressions(ReadFile(kRules))) {
    EXPECT_NE(section.find("`" + alert + "`"), std::string::npos) << "README: alert " << alert;
  }
  EXPECT_NE(section.find("--linger"), std::string::npos);
  EXPECT_NE(section.find("--metrics-addr"), std::string::npos);
}

TEST(Provisioning, DashboardProviderLoadsTheFolder) {
  const std::string provider =
      ReadFile(std::string(DASHBOARDS_DIR) + "/provisioning/dashboards.yaml");
  EXPECT_NE(provider.find("apiVersion: 1"), std::string::npos);
  EXPECT_NE(provider.find("type: file"), std::string::npos);
  EXPECT_TRUE(std::regex_search(provider, std::regex(R"(\n\s+path: /\S+)"))) << provider;
  const std::string datasource =
      ReadFile(std::string(DASHBOARDS_DIR) + "/provisioning/datasource.yaml");
  EXPECT_NE(datasource.find("type: prometheus"), std::string::npos);
}

}  // namespace
}  // namespace tier::obs
