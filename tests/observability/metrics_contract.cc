#include "metrics_contract.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

namespace tier::obs {
namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> Split(const std::string& s, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::stringstream stream(s);
  while (std::getline(stream, part, separator)) parts.push_back(part);
  if (!s.empty() && s.back() == separator) parts.emplace_back();
  return parts;
}

// The `...` tokens of a table cell, in order.
std::vector<std::string> CodeSpans(const std::string& cell) {
  std::vector<std::string> spans;
  size_t at = 0;
  for (;;) {
    const size_t b = cell.find('`', at);
    if (b == std::string::npos) break;
    const size_t e = cell.find('`', b + 1);
    if (e == std::string::npos) break;
    spans.push_back(cell.substr(b + 1, e - b - 1));
    at = e + 1;
  }
  return spans;
}

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}

// Reads a quoted string starting at s[i] (", ' or `); returns its unescaped value, moves i past it.
std::string ReadQuoted(const std::string& s, size_t& i) {
  const char quote = s[i++];
  std::string value;
  while (i < s.size() && s[i] != quote) {
    if (s[i] == '\\' && quote != '`' && i + 1 < s.size()) {
      value += s[i + 1];
      i += 2;
    } else {
      value += s[i++];
    }
  }
  ++i;  // closing quote
  return value;
}

void SkipSpaces(const std::string& s, size_t& i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
}

// Parses {a="x", b=~"y"} starting at s[i] == '{'; moves i past '}'.
void ReadMatchers(const std::string& s, size_t& i, Selector* selector) {
  ++i;
  for (;;) {
    SkipSpaces(s, i);
    if (i >= s.size() || s[i] == '}') break;
    if (s[i] == ',') {
      ++i;
      continue;
    }
    size_t b = i;
    while (i < s.size() && IsIdentChar(s[i])) ++i;
    const std::string label = s.substr(b, i - b);
    SkipSpaces(s, i);
    std::string op;
    while (i < s.size() && (s[i] == '=' || s[i] == '!' || s[i] == '~')) op += s[i++];
    SkipSpaces(s, i);
    if (i >= s.size() || (s[i] != '"' && s[i] != '\'' && s[i] != '`') || label.empty()) {
      // Not a matcher we understand: skip to the end of the braces.
      while (i < s.size() && s[i] != '}') ++i;
      break;
    }
    const std::string value = ReadQuoted(s, i);
    if (op == "=") selector->equal.emplace_back(label, value);
    selector->matchers.emplace_back(label, value);
    if (label == "__name__") selector->metric = value;
  }
  if (i < s.size()) ++i;
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> words = {
      "by",     "without", "on",     "ignoring", "group_left", "group_right", "and", "or",
      "unless", "bool",    "offset", "inf",      "nan",        "Inf",         "NaN", "atan2"};
  return words;
}

}  // namespace

// ---- README table -------------------------------------------------------------------------------

const std::vector<std::string>* ContractRow::values(const std::string& label) const {
  for (const auto& [name, values] : labels) {
    if (name == label) return &values;
  }
  return nullptr;
}

std::vector<ContractRow> ParseContractTable(const std::string& section,
                                            std::vector<std::string>* errors) {
  std::vector<ContractRow> rows;
  std::stringstream lines(section);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells = Split(line, '|');
    // "| a | b |" splits into "", " a ", " b ", "".
    if (cells.size() != 8) {
      errors->push_back("expected 6 cells: " + line);
      continue;
    }
    ContractRow row;
    const auto name = CodeSpans(cells[1]);
    if (name.size() != 1) {
      errors->push_back("first cell is not one `name`: " + line);
      continue;
    }
    row.name = name[0];
    row.from = Trim(cells[2]);
    row.type = Trim(cells[3]);
    row.unit = Trim(cells[5]);
    row.meaning = Trim(cells[6]);
    const std::string labels = Trim(cells[4]);
    if (labels != "—" && labels != "-") {
      for (const std::string& part : Split(labels, ';')) {
        const auto spans = CodeSpans(part);
        if (spans.empty() || Trim(part).find("`:") == std::string::npos) {
          errors->push_back(row.name + ": label part is not `label`: `v1`, `v2`: " + part);
          continue;
        }
        row.labels.emplace_back(spans[0], std::vector<std::string>(spans.begin() + 1, spans.end()));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::map<std::string, ContractRow> ContractByName(const std::vector<ContractRow>& rows) {
  std::map<std::string, ContractRow> by_name;
  for (const ContractRow& row : rows) by_name.emplace(row.name, row);
  return by_name;
}

// ---- Exposition
// -----------------------------------------------------------------------------------

std::set<std::string> Family::label_names() const {
  std::set<std::string> names;
  for (const Sample& s : samples) {
    for (const auto& [label, value] : s.labels) {
      if (type == "histogram" && label == "le") continue;
      if (type == "summary" && label == "quantile") continue;
      names.insert(label);
    }
  }
  return names;
}

std::set<std::string> Family::values(const std::string& label) const {
  std::set<std::string> values;
  for (const Sample& s : samples) {
    auto it = s.labels.find(label);
    if (it != s.labels.end()) values.insert(it->second);
  }
  return values;
}

double Family::sum(const std::string& sample_name) const {
  double total = 0;
  for (const Sample& s : samples) {
    if (s.name == sample_name) total += s.value;
  }
  return total;
}

std::map<std::string, Family> ParseExposition(const std::string& text,
                                              std::vector<std::string>* errors) {
  std::map<std::string, Family> families;
  std::stringstream lines(text);
  std::string line;
  std::string current;  // the family of the last # TYPE
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (Trim(line).empty()) continue;
    if (line[0] == '#') {
      std::stringstream words(line.substr(1));
      std::string keyword, name;
      words >> keyword >> name;
      if (keyword == "TYPE") {
        std::string type;
        words >> type;
        families[name].name = name;
        families[name].type = type;
        current = name;
      } else if (keyword == "HELP") {
        families[name].name = name;
        std::getline(words, families[name].help);
        families[name].help = Trim(families[name].help);
      }
      continue;
    }
    Sample sample;
    size_t i = 0;
    while (i < line.size() && IsIdentChar(line[i])) ++i;
    sample.name = line.substr(0, i);
    if (sample.name.empty()) {
      errors->push_back("unreadable line: " + line);
      continue;
    }
    if (i < line.size() && line[i] == '{') {
      Selector labels;
      ReadMatchers(line, i, &labels);
      for (const auto& [label, value] : labels.equal) sample.labels[label] = value;
    }
    SkipSpaces(line, i);
    const std::string value = line.substr(i, line.find(' ', i) - i);
    char* end = nullptr;
    sample.value = std::strtod(value.c_str(), &end);
    if (value.empty() || (end != nullptr && *end != '\0')) {
      errors->push_back("unreadable value: " + line);
      continue;
    }
    std::string family = sample.name;
    if (!current.empty() && sample.name.rfind(current, 0) == 0) family = current;
    if (families.count(family) == 0) {
      families[family].name = family;
      families[family].type = "untyped";
    }
    families[family].samples.push_back(std::move(sample));
  }
  return families;
}

// ---- PromQL -------------------------------------------------------------------------------------

std::vector<Selector> Selectors(const std::string& expr) {
  std::vector<Selector> selectors;
  size_t i = 0;
  const std::string& s = expr;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      ReadQuoted(s, i);
    } else if (c == '[') {  // range or subquery duration
      while (i < s.size() && s[i] != ']') ++i;
      ++i;
    } else if (c == '{') {  // a selector without a metric name: {__name__=~"..."}
      Selector selector;
      const size_t b = i;
      ReadMatchers(s, i, &selector);
      selector.text = s.substr(b, i - b);
      if (!selector.metric.empty()) selectors.push_back(std::move(selector));
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() &&
                std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    } else if (c == '$') {
      ++i;
      while (i < s.size() && (IsIdentChar(s[i]) || s[i] == '{' || s[i] == '}')) ++i;
    } else if (IsIdentStart(c)) {
      const size_t b = i;
      while (i < s.size() && IsIdentChar(s[i])) ++i;
      const std::string word = s.substr(b, i - b);
      size_t j = i;
      SkipSpaces(s, j);
      if (Keywords().count(word) != 0) {
        if (j < s.size() && s[j] == '(' &&
            (word == "by" || word == "without" || word == "on" || word == "ignoring" ||
             word == "group_left" || word == "group_right")) {
          while (j < s.size() && s[j] != ')') ++j;
          i = j + 1;
        }
        continue;
      }
      if (j < s.size() && s[j] == '(') continue;  // a function or an aggregation
      if (s.compare(j, 2, "by") == 0 || s.compare(j, 7, "without") == 0) {
        size_t k = j + (s[j] == 'b' ? 2 : 7);
        SkipSpaces(s, k);
        if (k < s.size() && s[k] == '(') continue;  // sum by (...) (...)
      }
      Selector selector;
      selector.metric = word;
      if (i < s.size() && s[i] == '{') ReadMatchers(s, i, &selector);
      selector.text = s.substr(b, i - b);
      selectors.push_back(std::move(selector));
    } else {
      ++i;
    }
  }
  return selectors;
}

std::set<std::string> GroupingLabels(const std::string& expr) {
  std::set<std::string> labels;
  static const std::regex clause(R"(\b(by|without)\s*\(([^)]*)\))");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), clause);
       it != std::sregex_iterator(); ++it) {
    for (const std::string& label : Split((*it)[2].str(), ',')) {
      if (!Trim(label).empty()) labels.insert(Trim(label));
    }
  }
  return labels;
}

std::string FamilyOf(const std::string& sample_name,
                     const std::map<std::string, ContractRow>& rows) {
  if (rows.count(sample_name) != 0) return sample_name;
  for (const char* suffix : {"_bucket", "_count", "_sum"}) {
    const std::string sfx = suffix;
    if (sample_name.size() > sfx.size() &&
        sample_name.compare(sample_name.size() - sfx.size(), sfx.size(), sfx) == 0) {
      const std::string base = sample_name.substr(0, sample_name.size() - sfx.size());
      auto it = rows.find(base);
      if (it != rows.end() &&
          (it->second.type == "histogram" || (it->second.type == "summary" && sfx != "_bucket"))) {
        return base;
      }
    }
  }
  return sample_name;
}

std::vector<std::pair<std::string, std::string>> RuleExpressions(const std::string& yaml) {
  std::vector<std::pair<std::string, std::string>> rules;
  std::vector<std::string> lines = Split(yaml, '\n');
  std::string alert;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const std::string trimmed = Trim(line);
    if (trimmed.rfind("- alert:", 0) == 0 || trimmed.rfind("- record:", 0) == 0) {
      alert = Trim(trimmed.substr(trimmed.find(':') + 1));
      continue;
    }
    if (trimmed.rfind("expr:", 0) != 0) continue;
    const size_t indent = line.find_first_not_of(' ');
    std::string rest = Trim(trimmed.substr(5));
    if (rest.empty() || rest[0] == '|' || rest[0] == '>') {
      std::string text;
      while (n + 1 < lines.size() &&
             (Trim(lines[n + 1]).empty() || lines[n + 1].find_first_not_of(' ') > indent)) {
        text += Trim(lines[++n]) + "\n";
      }
      rest = Trim(text);
    }
    rules.emplace_back(alert, rest);
  }
  return rules;
}

// ---- A lingering tier-host replay ---------------------------------------------------------------

bool LingeringReplay::Start(const std::string& tier_host,
                            const std::vector<std::string>& server_args, int port,
                            const std::vector<std::string>& replay_args, double timeout_s,
                            std::string* error) {
  std::vector<std::string> argv = {tier_host};
  argv.insert(argv.end(), server_args.begin(), server_args.end());
  argv.push_back("--metrics-addr");
  argv.push_back("127.0.0.1:" + std::to_string(port));
  argv.push_back("replay");
  argv.insert(argv.end(), replay_args.begin(), replay_args.end());
  argv.push_back("--no-progress");
  argv.push_back("--linger");
  if (!child_.Start(argv, dir_ + "/tier-host.out", dir_ + "/tier-host.err", error)) return false;
  const bool done = WaitFor(
      [&] {
        return !child_.running() ||
               ReadFile(child_.stderr_path()).find("serving /metrics until") != std::string::npos;
      },
      timeout_s, 0.1);
  const std::string err = ReadFile(child_.stderr_path());
  port_ = MetricsPortFromLog(err);
  if (!done || !child_.running() || port_ == 0) {
    std::string argline;
    for (const std::string& a : argv) argline += a + " ";
    *error = (done ? "tier-host exited (status " + std::to_string(child_.exit_code()) + ")"
                   : "tier-host did not finish its replay in " + std::to_string(timeout_s) + " s") +
             " before lingering: " + argline + "\n" + log();
    return false;
  }
  return true;
}

std::string LingeringReplay::Scrape(std::string* error) const {
  const HttpResponse response = HttpGet(port_, "/metrics", 30);
  if (response.status != 200) {
    *error = "GET /metrics on port " + std::to_string(port_) + ": status " +
             std::to_string(response.status) + " " + response.error;
    return "";
  }
  return response.body;
}

std::string LingeringReplay::log() const {
  return "--- tier-host stdout\n" + ReadFile(dir_ + "/tier-host.out") + "--- tier-host stderr\n" +
         ReadFile(dir_ + "/tier-host.err");
}

std::string DiskPluginPath() {
  const std::string path = TIER_DISK_PLUGIN;
  if (!path.empty() && !std::filesystem::exists(path)) return "";
  return path;
}

}  // namespace tier::obs
