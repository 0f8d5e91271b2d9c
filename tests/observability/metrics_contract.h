// metrics_contract.h -- the two sides the Contract suite compares: the metric table in README.md
// (between <!-- metrics-table:begin --> and <!-- metrics-table:end -->) and a Prometheus text
// exposition scraped from a live tier-host. Also PromQL selector extraction for the dashboard and
// rule checks, and a tier-host replay kept alive with --linger.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "obs_support.h"

namespace tier::obs {

// ---- README table -------------------------------------------------------------------------------

// One row: | `name` | from | type | `label`: `v1`, `v2`; `label2`: ... | unit | meaning |
struct ContractRow {
  std::string name;
  std::string from;  // server | provider | library
  std::string type;  // counter | gauge | histogram | summary
  std::vector<std::pair<std::string, std::vector<std::string>>> labels;  // in table order
  std::string unit;
  std::string meaning;
  const std::vector<std::string>* values(const std::string& label) const;
};

// Parses the table rows (lines starting with "| `"); malformed rows are reported in *errors.
std::vector<ContractRow> ParseContractTable(const std::string& section,
                                            std::vector<std::string>* errors);
std::map<std::string, ContractRow> ContractByName(const std::vector<ContractRow>& rows);

// ---- Exposition
// -----------------------------------------------------------------------------------

struct Sample {
  std::string name;  // as exposed, e.g. tier_x_bucket
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Family {
  std::string name;
  std::string type;  // from "# TYPE"; "untyped" when absent
  std::string help;
  std::vector<Sample> samples;
  // Label names of the samples, without the le/quantile the type implies.
  std::set<std::string> label_names() const;
  std::set<std::string> values(const std::string& label) const;
  double sum(const std::string& sample_name) const;  // sum of the samples with that name
};

// Parses the text format; lines it cannot read are reported in *errors.
std::map<std::string, Family> ParseExposition(const std::string& text,
                                              std::vector<std::string>* errors);

// ---- PromQL -------------------------------------------------------------------------------------

struct Selector {
  std::string metric;                                         // as written, e.g. tier_x_bucket
  std::vector<std::pair<std::string, std::string>> equal;     // label="value"
  std::vector<std::pair<std::string, std::string>> matchers;  // every label=~ != !~ "value"
  std::string text;                                           // the selector as written
};
// Every vector selector naming a metric (`name{...}` or a bare `name`) in a PromQL expression,
// plus {__name__=~"..."} selectors (metric = the regex). Function names and keywords are skipped.
std::vector<Selector> Selectors(const std::string& expr);
// Label names in by (...) / without (...) clauses.
std::set<std::string> GroupingLabels(const std::string& expr);
// The family name a sample name belongs to (strips _bucket, _count, _sum for the given types).
std::string FamilyOf(const std::string& sample_name,
                     const std::map<std::string, ContractRow>& rows);

// Every `expr:` of a Prometheus rules YAML file, with the alert name before it.
std::vector<std::pair<std::string, std::string>> RuleExpressions(const std::string& yaml);

// ---- A lingering tier-host replay ---------------------------------------------------------------

// Starts `tier-host <server_args> --metrics-addr 127.0.0.1:PORT replay <replay_args> --linger
// --no-progress` (PORT 0 = any), waits for the replay to end, and knows the port.
class LingeringReplay {
 public:
  LingeringReplay(std::string dir) : dir_(std::move(dir)) {}
  // False with a message when it did not reach "replay done" within timeout_s.
  bool Start(const std::string& tier_host, const std::vector<std::string>& server_args, int port,
             const std::vector<std::string>& replay_args, double timeout_s, std::string* error);
  int port() const { return port_; }
  std::string Scrape(std::string* error) const;  // GET /metrics
  Child& child() { return child_; }
  std::string log() const;  // stdout and stderr so far

 private:
  std::string dir_;
  Child child_;
  int port_ = 0;
};

// The disk provider built with this tree (libtier_disk.so); "" when it is not built.
std::string DiskPluginPath();

}  // namespace tier::obs
