#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <set>
#include <string>

#include "base/duration.h"
#include "base/log.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

TEST(DurationTest, ParsesGoStyleDurations) {
  struct Case {
    const char* text;
    int64_t ms;
  } cases[] = {{"0", 0},       {"250ms", 250},     {"30s", 30000},
               {"5m", 300000}, {"1h30m", 5400000}, {"1m1s1ms", 61001}};
  for (const Case& c : cases) {
    auto d = ParseDuration(c.text);
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.status();
    EXPECT_EQ(d->count(), c.ms) << c.text;
    EXPECT_EQ(ParseDuration(FormatDuration(*d))->count(), c.ms) << "round trip of " << c.text;
  }
}

TEST(DurationTest, SpreadStaysInItsRangeAndSpreads) {
  const Duration d = std::chrono::seconds(600);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const Duration s = Spread(d, 1, 2);
    ASSERT_GE(s, d);
    ASSERT_LT(s, 2 * d);
    seen.insert(s.count() / 60000);  // minute buckets
  }
  EXPECT_EQ(seen.size(), 10u);  // 1,000 draws leave no minute of the ten empty
  const Duration j = Jitter(std::chrono::milliseconds(1000));
  EXPECT_GE(j.count(), 800);
  EXPECT_LE(j.count(), 1200);
}

TEST(DurationTest, RejectsBadDurations) {
  for (const char* bad :
       {"", "5", "s", "5x", "-5s", "99999999999999h", "inf", "1us", "1.5", " 5s"}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
  }
  EXPECT_NE(std::string(ParseDuration("5x").status().message()).find("unknown unit \"x\""),
            std::string::npos);
  EXPECT_NE(std::string(ParseDuration("soon").status().message()).find("invalid duration \"soon\""),
            std::string::npos);
}

// Go's syntax as absl::ParseDuration reads it: fractions and several units.
TEST(DurationTest, AcceptsGoFractions) {
  struct Case {
    const char* text;
    int64_t ms;
  } cases[] = {{"1.5s", 1500}, {"0.25h", 900000}, {"1m1.001s", 61001}, {"1000us", 1}};
  for (const Case& c : cases) {
    auto d = ParseDuration(c.text);
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.status();
    EXPECT_EQ(d->count(), c.ms) << c.text;
  }
  EXPECT_EQ(FormatDuration(std::chrono::milliseconds(61001)), "1m1.001s");
}

// The hand-written parser capped each number but not the sum, so three
// large terms overflowed int64 (undefined behaviour) and were accepted.
TEST(DurationTest, RejectsOverflowAndHugeValues) {
  for (const char* big : {"1099511627775h1099511627775h1099511627775h", "87601h",
                          "9223372036854775807ms", "99999999999999999999s"}) {
    auto d = ParseDuration(big);
    ASSERT_FALSE(d.ok()) << big;
    EXPECT_NE(std::string(d.status().message()).find("too large"), std::string::npos)
        << big << ": " << d.status();
  }
  EXPECT_TRUE(ParseDuration("87600h").ok());
  EXPECT_NE(std::string(ParseDuration("-1s").status().message()).find("negative"),
            std::string::npos);
}

// Found by fuzz_duration_quantity: "+-7" parsed as -7.
TEST(ParseIntTest, OneSignAtMost) {
  int n = 0;
  EXPECT_TRUE(ParseInt("+7", &n));
  EXPECT_EQ(n, 7);
  EXPECT_TRUE(ParseInt("-7", &n));
  EXPECT_EQ(n, -7);
  for (const char* bad : {"+-7", "-+7", "++7", "+", "7 ", "0x7", ""}) {
    EXPECT_FALSE(ParseInt(bad, &n)) << bad;
  }
}

// JSON log lines carried bytes that are not UTF-8 through as they were, so a
// server message or file name with such bytes made the line invalid JSON.
TEST(LogTest, JsonLinesStayValidForInvalidUtf8) {
  const std::vector<LogField> fields = {
      {"error", "bad \xff\xfe \xc3\x28 \xed\xa0\x80 \xf0\x90\x80"},
      {"ok", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}};
  const std::string line = FormatLogLine(LogFormat::kJson, LogLevel::kWarning,
                                         "2026-01-02T03:04:05.678Z", "msg \xc0\x80", fields);
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseStopWhenDoneFlag>(
      line.c_str());
  ASSERT_FALSE(doc.HasParseError()) << line;
  EXPECT_STREQ(doc["msg"].GetString(), "msg \xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_STREQ(doc["error"].GetString(),
               "bad \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd( \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
               "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_STREQ(doc["ok"].GetString(), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // intact
  EXPECT_EQ(line.back(), '\n');
}

TEST(ResourceNameTest, AcceptsValidNames) {
  for (const char* ok :
       {"nvidia.com/gpu", "nvidia.com/gpu.shared", "example.org/mig-1g.10gb", "a.b/C_d-e.f"}) {
    EXPECT_TRUE(ValidateExtendedResourceName(ok).ok()) << ok;
  }
}

TEST(ResourceNameTest, RejectsInvalidNamesWithTheRule) {
  struct Case {
    std::string name;
    std::string expect;
  } cases[] = {
      {"gpu", "has no domain"},
      {"kubernetes.io/gpu", "reserved domain"},
      {"foo.kubernetes.io/gpu", "reserved domain"},
      {"requests.nvidia.com/gpu", "must not start with \"requests.\""},
      {"nvidia.com/" + std::string(64, 'g'), "64 characters long, at most 63"},
      {"nvidia.com/", "empty name"},
      {"nvidia.com/-gpu", "start and end with a letter or digit"},
      {"nvidia.com/g pu", "invalid character ' '"},
      {"NVIDIA.com/gpu",
       "the domain \"NVIDIA.com\" of resource name \"NVIDIA.com/gpu\" is not a DNS subdomain"},
      {"nvidia_x.com/gpu", "has the invalid character '_'"},
      {"nvidia.com/a/b", "more than one '/'"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateExtendedResourceName(c.name);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_NE(std::string(s.message()).find(c.expect), std::string::npos)
        << c.name << " -> " << s.message();
  }
}

TEST(ResourceNameTest, NodeNames) {
  EXPECT_TRUE(ValidateNodeName("gpu-node-1.example").ok());
  EXPECT_FALSE(ValidateNodeName("").ok());
  EXPECT_FALSE(ValidateNodeName("Node_1").ok());
  EXPECT_FALSE(ValidateNodeName(std::string(254, 'a')).ok());
}

TEST(TextTest, ClosestMatchSuggestsTyposOnly) {
  std::vector<std::string> keys = {"migStrategy", "failOnInitError", "plugin"};
  EXPECT_EQ(ClosestMatch("migStrategi", keys), "migStrategy");
  EXPECT_EQ(ClosestMatch("MigStrategy", keys), "migStrategy");
  EXPECT_EQ(ClosestMatch("plugni", keys), "plugin");
  EXPECT_EQ(ClosestMatch("completelyDifferent", keys), "");
}

TEST(TextTest, PrintableEscapesBinary) {
  EXPECT_EQ(Printable(std::string("a\x01\xff", 3)), "a\\x01\\xff");
  EXPECT_EQ(Printable("abcdef", 3), "abc...");
}

// As the kubelet keeps a device's health message: valid UTF-8, at most
// `max` bytes, a longer one cut after a whole character and marked.
TEST(TextTest, Utf8ClipKeepsWholeCharactersAndValidBytes) {
  EXPECT_EQ(Utf8Clip("XID 79", 1024), "XID 79");
  EXPECT_EQ(Utf8Clip(std::string(1100, 'x'), 1024), std::string(1021, 'x') + "...");
  // "\xc3\xa9" (e acute) is 2 bytes: 1021 bytes would split the 511th.
  std::string accents;
  for (int i = 0; i < 600; ++i) accents += "\xc3\xa9";
  const std::string cut = Utf8Clip(accents, 1024);
  EXPECT_EQ(cut.size(), 1020u + 3);
  EXPECT_EQ(cut.substr(0, 1020), accents.substr(0, 1020));
  EXPECT_TRUE(cut.ends_with("..."));
  // A stray byte, a lone continuation byte, and a sequence cut short (its
  // lead byte and its continuation byte, each alone): U+FFFD each.
  EXPECT_EQ(Utf8Clip(std::string("a\xff"
                                 "b\x80"
                                 "c\xe2\x82",
                                 7),
                     64),
            "a\xef\xbf\xbd"
            "b\xef\xbf\xbd"
            "c\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(Utf8Clip("abcdef", 2), "");  // no room for the mark
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80"), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80"), 0u);  // a surrogate
}

TEST(StringsTest, CatSplitParse) {
  EXPECT_EQ(StrCat("a", 1, std::string_view("b"), std::string("c"), -2, 'x'), "a1bc-2x");
  auto parts = StrSplit("a,,b", ',');
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1], "");
  int v = 0;
  EXPECT_TRUE(ParseInt("42", &v));
  EXPECT_EQ(v, 42);
  EXPECT_FALSE(ParseInt("42x", &v));
  EXPECT_FALSE(ParseInt("", &v));
  EXPECT_EQ(StripWhitespace("  a b \n"), "a b");
}

// A program run to its end: exit code, both outputs and the environment
// given; one that runs too long is killed and named; one that cannot be
// executed exits 127 saying why.
TEST(RunProgramTest, CapturesExitOutputAndEnvironmentAndBoundsTime) {
  ProgramRun run;
  run.env.push_back("GPU_AGENT_TEST_VALUE=seen");
  absl::StatusOr<ProgramResult> r =
      RunProgram({"/bin/sh", "-c", "echo out $GPU_AGENT_TEST_VALUE; echo err >&2; exit 3"}, run);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->How(), "exit code 3");
  EXPECT_EQ(r->out, "out seen\n");
  EXPECT_EQ(r->err, "err\n");

  run.timeout = std::chrono::milliseconds(200);
  r = RunProgram({"/bin/sh", "-c", "exec sleep 30"}, run);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.status().message(), "/bin/sh did not finish within 200 ms");

  r = RunProgram({"/nonexistent/tool"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_EQ(r->err, "cannot run /nonexistent/tool: No such file or directory");
}

}  // namespace
}  // namespace gpu_agent
