// trace_loader_test.cc -- TraceLoader: LoadMooncakeTrace refuses every value it cannot replay
// faithfully (negative, fractional, beyond 64 bits, beyond the documented bounds), naming the file,
// the line, the field and the value as written; directories, devices and endless lines get their
// own messages; the widest valid values load exactly.
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <fstream>
#include <string>
#include <thread>

#include "test_support.h"
#include "workload.h"

namespace tier::sim::test {
namespace {

const char* const kGoodLine =
    R"({"timestamp": 5, "input_length": 1000, "output_length": 3, "hash_ids": [1, 2]})";

// A line like kGoodLine with one field's value replaced by `text`.
std::string LineWith(const std::string& field, const std::string& text) {
  std::string input = field == "input_length" ? text : "1000";
  std::string output = field == "output_length" ? text : "3";
  std::string ids = field == "hash_ids" ? text : "[1, 2]";
  std::string timestamp = field == "timestamp" ? text : "5";
  return "{\"timestamp\": " + timestamp + ", \"input_length\": " + input +
         ", \"output_length\": " + output + ", \"hash_ids\": " + ids + "}";
}

class TraceLoader : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    const std::string path = dir_.path() + "/trace.jsonl";
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }
  // Loads kGoodLine then `line` (line 2); the refusal's message, "" when it loaded.
  std::string SecondLineRefusal(const std::string& line) {
    path_ = Write(std::string(kGoodLine) + "\n" + line + "\n");
    auto loaded = LoadMooncakeTrace(path_);
    if (loaded.ok()) return "";
    EXPECT_EQ(loaded.status().code(), TIER_INVALID_ARGUMENT);
    return loaded.status().message();
  }
  tier::test::ScopedTempDir dir_;
  std::string path_;
};

TEST_F(TraceLoader, NegativeInputLengthIsRefusedNamingFileLineFieldAndValue) {
  const std::string m = SecondLineRefusal(LineWith("input_length", "-5"));
  EXPECT_EQ(m, "trace '" + path_ +
                   "' line 2: field 'input_length' is -5; expected a whole number "
                   "from 1 to 4194304");
}

TEST_F(TraceLoader, LengthsBeyondTheBoundsAreRefused) {
  for (const auto& [field, text] : {std::pair<std::string, std::string>{"input_length", "4194305"},
                                    {"input_length", "1e30"},
                                    {"input_length", "0"},
                                    {"input_length", "1000.5"},
                                    {"output_length", "-1"},
                                    {"output_length", "99999999999999999999"},
                                    {"output_length", "4194305"},
                                    {"output_length", "2.5"}}) {
    SCOPED_TRACE(field + " " + text);
    const std::string m = SecondLineRefusal(LineWith(field, text));
    EXPECT_NE(m.find("line 2: field '" + field + "' is " + text + ";"), std::string::npos) << m;
  }
}

TEST_F(TraceLoader, HashIdsThatAreFractionsNegativeOrWiderThan64BitsAreRefused) {
  for (const std::string id : {"1.5", "-1", "18446744073709551616", "1e3", "\"7\""}) {
    SCOPED_TRACE(id);
    const std::string m = SecondLineRefusal(LineWith("hash_ids", "[1, " + id + "]"));
    EXPECT_NE(m.find("line 2: field 'hash_ids[1]' is " + id +
                     "; expected a whole number from 0 to 18446744073709551615"),
              std::string::npos)
        << m;
  }
}

TEST_F(TraceLoader, TimestampsOutsideTheClockAreRefused) {
  for (const std::string text : {"-1", "1e300", "\"now\""}) {
    SCOPED_TRACE(text);
    const std::string m = SecondLineRefusal(LineWith("timestamp", text));
    EXPECT_NE(m.find("field 'timestamp' is " + text + ";"), std::string::npos) << m;
  }
  path_ = Write(LineWith("timestamp", "900000000000"));
  auto stretched = LoadMooncakeTrace(path_, 10000);
  ASSERT_FALSE(stretched.ok());
  EXPECT_NE(stretched.status().message().find("--trace-time-scale"), std::string::npos);
}

TEST_F(TraceLoader, WidestValidValuesLoadExactly) {
  path_ = Write(LineWith("hash_ids", "[18446744073709551615, 0]") + "\n\n" +
                R"({"timestamp": 0.5, "input_length": 512, "output_length": 0, "hash_ids": [9],)"
                R"( "extra": {"ignored": [1.5]}})"
                "\n");
  auto loaded = LoadMooncakeTrace(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded.value().requests.size(), 2u);
  const Request& first = loaded.value().requests[0];
  EXPECT_EQ(first.blocks, (std::vector<uint64_t>{UINT64_MAX, 0}));
  EXPECT_EQ(first.seal_blocks, (std::vector<uint64_t>{UINT64_MAX}));
  EXPECT_EQ(first.arrival_ns, 5000000u);
  EXPECT_EQ(loaded.value().requests[1].output_tokens, 0u);
  EXPECT_EQ(loaded.value().requests[1].arrival_ns, 500000u);
}

TEST_F(TraceLoader, WrongNumberOfHashIdsNamesTheCounts) {
  const std::string m = SecondLineRefusal(LineWith("hash_ids", "[1]"));
  EXPECT_NE(m.find("line 2: field 'hash_ids' has 1 ids for 1000 tokens (expected 2"),
            std::string::npos)
      << m;
}

TEST_F(TraceLoader, DirectoryAndDeviceHaveTheirOwnMessages) {
  auto dir = LoadMooncakeTrace(dir_.path());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(),
            "trace '" + dir_.path() + "': is a directory, not a trace file");
  auto device = LoadMooncakeTrace("/dev/null");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().message(), "trace '/dev/null': is a device, not a trace file");
}

TEST_F(TraceLoader, LineLongerThanTheBoundIsRefused) {
  const std::string m = SecondLineRefusal(std::string(kMaxTraceLineBytes + 1, ' '));
  EXPECT_NE(m.find("line 2: longer than 1048576 bytes"), std::string::npos) << m;
}

TEST_F(TraceLoader, NotJsonNamesTheLine) {
  const std::string m = SecondLineRefusal("{\"timestamp\": ");
  EXPECT_NE(m.find("line 2: not JSON"), std::string::npos) << m;
  EXPECT_NE(SecondLineRefusal("[1, 2]").find("line 2: not a JSON object"), std::string::npos);
}

TEST_F(TraceLoader, APipeIsATrace) {
  const std::string fifo = dir_.path() + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << kGoodLine << "\n" << kGoodLine; });
  auto loaded = LoadMooncakeTrace(fifo);
  writer.join();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded.value().requests.size(), 2u);
}

}  // namespace
}  // namespace tier::sim::test
