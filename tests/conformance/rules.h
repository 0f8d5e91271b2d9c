// rules.h -- the rule table of abi/tier_provider.h: every normative sentence has an id, the
// AbiConformance tests that check it (or why no black-box test can), and the ConformanceSuite bad
// provider that proves the check can fail. tier-conformance prints at the end how many rules it
// checked, skipped (and why) and failed per provider; --list-rules prints the table (abi/README.md
// holds a copy, kept equal by ConformanceSuite.RuleTableMatchesTheReadme).
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tier::conformance {

struct Rule {
  const char* id;     // e.g. "PROBE-COUNT"
  const char* where;  // the header's function or section
  const char* text;   // the rule, shortened
  // AbiConformance test names (without the provider suffix) that check it; empty = none.
  std::vector<const char*> tests;
  // Why no black-box test checks it (tests empty), or "" when tests check it.
  const char* unverifiable;
  // The ConformanceSuite case whose bad provider this rule's check catches, or "".
  const char* proof;
};

const std::vector<Rule>& Rules();

// Marks `rule_id` skipped for the running test's provider with `reason` (a capability not claimed,
// an optional slot absent, ...), even though the test itself goes on and passes. Test thread.
void SkipRule(const char* rule_id, const std::string& reason);

// The listener that prints the per-provider summary after the last test.
::testing::TestEventListener* NewRuleSummaryPrinter();

// Prints the table as markdown (tier-conformance --list-rules).
void PrintRuleTable();

}  // namespace tier::conformance
