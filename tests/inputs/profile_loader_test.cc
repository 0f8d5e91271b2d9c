// profile_loader_test.cc -- ProfileLoader: the shipped profiles load; a profile with an absurd
// number (2^62 KV bytes per token, negative state bytes or costs, fractional byte counts, a
// string for a number) is refused naming the file, the field and the value as written.
#include <gtest/gtest.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include <tier/host/model_profile.h>

#include "test_support.h"

namespace tier::test {
namespace {

using nlohmann::json;

const std::string kShipped = std::string(PROFILE_DIR) + "/qwen3.8-27b-int8-rtx5090.json";

json ReadShipped() {
  std::ifstream file(kShipped);
  return json::parse(file);
}

class ProfileLoader : public ::testing::Test {
 protected:
  // The shipped profile with the value at `pointer` written as `text` (verbatim).
  std::string WriteWith(const std::string& pointer, const std::string& text) {
    json doc = ReadShipped();
    doc[json::json_pointer(pointer)] = "@@VALUE@@";
    std::string body = doc.dump(2);
    body.replace(body.find("\"@@VALUE@@\""), 11, text);
    const std::string path = dir_.path() + "/profile.json";
    std::ofstream(path, std::ios::trunc) << body;
    return path;
  }
  ScopedTempDir dir_;
};

TEST_F(ProfileLoader, ShippedProfilesLoad) {
  const std::vector<std::string> names = ShippedProfileNames();
  ASSERT_GE(names.size(), 4u);
  for (const std::string& name : names) {
    auto profile = LoadModelProfile(ResolveProfilePath(name));
    EXPECT_TRUE(profile.ok()) << name << ": " << profile.status().ToString();
  }
  auto int8 = LoadModelProfile(kShipped);
  ASSERT_TRUE(int8.ok());
  EXPECT_EQ(int8.value().kv_bytes_per_token, 33792u);
  EXPECT_EQ(int8.value().FixedStateBytes(), 195897344u);
  EXPECT_DOUBLE_EQ(int8.value().attention_pair_ns, 7.1);
}

TEST_F(ProfileLoader, AbsurdValuesAreRefusedNamingFileFieldAndValue) {
  struct Case {
    std::string pointer, text, field;
  };
  const Case cases[] = {
      {"/kv_bytes_per_token", "4611686018427387904", "kv_bytes_per_token"},
      {"/kv_bytes_per_token", "33792.5", "kv_bytes_per_token"},
      {"/kv_bytes_per_token", "33793", "kv_bytes_per_token"},  // not a multiple of 16 layers
      {"/state_image/0/bytes", "-150994944", "state_image[0].bytes"},
      {"/state_image/1/bytes", "2949120.5", "state_image[1].bytes"},
      {"/hidden_state_bytes", "18446744073709551616", "hidden_state_bytes"},
      {"/prefill/token_ns", "-25000", "prefill.token_ns"},
      {"/prefill/attention_pair_ns", "1e400", "prefill.attention_pair_ns"},
      {"/prefill/chunk_tokens", "0", "prefill.chunk_tokens"},
      {"/decode/token_ns", "\"fast\"", "decode.token_ns"},
      {"/transfer/d2h_ns_per_byte", "-0.02", "transfer.d2h_ns_per_byte"},
      {"/tokens_per_page", "4294967360", "tokens_per_page"},  // 2^32 + 64 would wrap to 64
      {"/full_attention_layers", "-16", "full_attention_layers"},
      {"/mtp_layers", "true", "mtp_layers"},
      {"/name", "\"a/b\"", "name"},
      {"/model", "\"line\\nbreak\"", "model"},
      {"/state_image", "{}", "state_image"},
      {"/prefill", "[]", "prefill"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer + " = " + c.text);
    const std::string path = WriteWith(c.pointer, c.text);
    auto profile = LoadModelProfile(path);
    ASSERT_FALSE(profile.ok());
    EXPECT_EQ(profile.status().code(), TIER_INVALID_ARGUMENT);
    const std::string& m = profile.status().message();
    EXPECT_EQ(m.rfind("model profile '" + path + "': field '" + c.field + "' is " + c.text, 0), 0u)
        << m;
  }
}

TEST_F(ProfileLoader, MissingFieldIsNamed) {
  json doc = ReadShipped();
  doc["transfer"].erase("op_ns");
  const std::string path = dir_.path() + "/missing.json";
  std::ofstream(path) << doc.dump();
  auto profile = LoadModelProfile(path);
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(profile.status().message(),
            "model profile '" + path + "': field 'transfer.op_ns' is missing");
}

TEST_F(ProfileLoader, DirectoriesAndNonJsonAreRefused) {
  auto dir = LoadModelProfile(dir_.path());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(), "model profile '" + dir_.path() + "': is a directory");
  const std::string path = dir_.path() + "/broken.json";
  std::ofstream(path) << "{\"name\": ";
  auto broken = LoadModelProfile(path);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("model profile '" + path + "': not JSON"),
            std::string::npos)
      << broken.status().message();
}

}  // namespace
}  // namespace tier::test
