// json_input_test.cc -- JsonInput: numbers keep the text they were written with; reads are typed
// and bounded and their messages name the field.
#include <gtest/gtest.h>

#include "json_input.h"

namespace tier::test {
namespace {

TEST(JsonInput, NumbersThatAreNotExactIntegersKeepTheirText) {
  auto input = ParseJsonInput(R"({"a": 1.50, "b": [1, 18446744073709551616], "c": {"d/e": 1e30}})");
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  const JsonReader reader(input.value(), "x");
  EXPECT_EQ(reader.Text("/a"), "1.50");
  EXPECT_EQ(reader.Text("/b/0"), "1");
  EXPECT_EQ(reader.Text("/b/1"), "18446744073709551616");
  EXPECT_EQ(reader.Text("/c/d~1e"), "1e30");
}

TEST(JsonInput, WholeRefusesFractionsNegativesAndWideNumbers) {
  auto input = ParseJsonInput(R"({"f": 2.0, "n": -1, "w": 18446744073709551616, "ok": 7,
                                  "max": 18446744073709551615})");
  ASSERT_TRUE(input.ok());
  const JsonReader reader(input.value(), "file 'p'");
  uint64_t value = 0;
  for (const auto& [field, text] : {std::pair<std::string, std::string>{"f", "2.0"},
                                    {"n", "-1"},
                                    {"w", "18446744073709551616"}}) {
    const Status s = reader.Whole("/" + field, 0, UINT64_MAX, &value);
    EXPECT_EQ(s.code(), TIER_INVALID_ARGUMENT);
    EXPECT_EQ(s.message(), "file 'p': field '" + field + "' is " + text +
                               "; expected a whole number from 0 to 18446744073709551615");
  }
  EXPECT_FALSE(reader.Whole("/ok", 8, 9, &value).ok());
  ASSERT_TRUE(reader.Whole("/ok", 7, 7, &value).ok());
  EXPECT_EQ(value, 7u);
  ASSERT_TRUE(reader.Whole("/max", 0, UINT64_MAX, &value).ok());
  EXPECT_EQ(value, UINT64_MAX);
  EXPECT_EQ(reader.Whole("/absent", 0, 1, &value).message(), "file 'p': field 'absent' is missing");
}

TEST(JsonInput, NumberRefusesOverflowAndOutOfRange) {
  auto overflow = ParseJsonInput(R"({"a": {"inf": [0, -1e400]}})");
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().message(),
            "field 'a.inf[1]' is -1e400, beyond the range of a number");
  auto input = ParseJsonInput(R"({"big": 1e300, "neg": -0.5, "s": "3"})");
  ASSERT_TRUE(input.ok());
  const JsonReader reader(input.value(), "w");
  double value = 0;
  EXPECT_NE(reader.Number("/big", 0, 1e299, &value).message().find("is 1e300;"), std::string::npos);
  EXPECT_NE(reader.Number("/neg", 0, 1, &value).message().find("is -0.5;"), std::string::npos);
  EXPECT_NE(reader.Number("/s", 0, 10, &value).message().find("is \"3\";"), std::string::npos);
}

TEST(JsonInput, FieldNamesReadLikeTheFile) {
  EXPECT_EQ(JsonFieldName("/prefill/chunk_ns"), "prefill.chunk_ns");
  EXPECT_EQ(JsonFieldName("/state_image/0/bytes"), "state_image[0].bytes");
  EXPECT_EQ(JsonFieldName("/hash_ids/12"), "hash_ids[12]");
}

TEST(JsonInput, DeepNestingAndMalformedTextAreRefused) {
  EXPECT_FALSE(ParseJsonInput(std::string(100, '[') + std::string(100, ']')).ok());
  EXPECT_TRUE(ParseJsonInput(std::string(10, '[') + std::string(10, ']')).ok());
  EXPECT_FALSE(ParseJsonInput("{\"a\": 1} trailing").ok());
  EXPECT_FALSE(ParseJsonInput("").ok());
}

}  // namespace
}  // namespace tier::test
