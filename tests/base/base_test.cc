#include <gtest/gtest.h>

#include <set>

#include "base/duration.h"
#include "base/resource_name.h"
#include "base/strings.h"
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
  for (const char* bad : {"", "5", "s", "5x", "-5s", "1.5s", "99999999999999h"}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
  }
  EXPECT_NE(std::string(ParseDuration("5x").status().message()).find("unknown unit \"x\""),
            std::string::npos);
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

}  // namespace
}  // namespace gpu_agent
