// `gpu-agent config --plan`'s report (plan_report.h) for generations built
// as `run` builds them from a config and a hand-made inventory: per resource
// its socket (plugin mode only), devices and healthy ones, units and
// replicas, and IDs, in text, JSON and YAML.
#include "agent/cli/plan_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/gpu_records.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

// The generation `run` builds from `yaml` on `inv`, with no environment.
std::shared_ptr<const Generation> Build(const std::string& yaml, nvml::Inventory inv) {
  testing::TempDir dir;
  ConfigRequest req;
  req.file = dir.Write("config.yaml", yaml);
  req.env = [](const std::string&) { return std::optional<std::string>(); };
  absl::StatusOr<LoadedConfig> loaded = LoadConfig(req);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return nullptr;
  inv.driver_version = "550.54.15";
  absl::StatusOr<std::shared_ptr<const Generation>> gen =
      BuildGeneration(*loaded, std::move(inv), GenerationOptionsFor(loaded->config));
  EXPECT_TRUE(gen.ok()) << gen.status();
  return gen.ok() ? *gen : nullptr;
}

rapidjson::Document Json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

std::vector<std::string> Ids(const rapidjson::Value& resource) {
  std::vector<std::string> ids;
  for (const auto& id : resource["ids"].GetArray()) ids.push_back(id.GetString());
  return ids;
}

TEST(PlanReportTest, PluginModeShowsEachResourceWithItsSocket) {
  auto gen = Build("version: v1\nmode: plugin\n", testing::PlainNode(2));
  ASSERT_NE(gen, nullptr);
  const std::string text = PlanReport(*gen, "text");
  EXPECT_THAT(text, HasSubstr("(mode plugin)\nnvidia.com/gpu\n  endpoint: "));
  EXPECT_THAT(text, HasSubstr("  devices:  2 (2 healthy)\n  units:    2 x 1 replica\n"));
  EXPECT_THAT(text, HasSubstr("  ids:      GPU-0aaa GPU-1aaa\n"));
  EXPECT_THAT(text, Not(HasSubstr("cdi\n")));  // envvar: no CDI spec

  rapidjson::Document d = Json(PlanReport(*gen, "json"));
  EXPECT_STREQ(d["mode"].GetString(), "plugin");
  ASSERT_EQ(d["resources"].Size(), 1u);
  const auto& r = d["resources"][0];
  EXPECT_STREQ(r["name"].GetString(), "nvidia.com/gpu");
  EXPECT_THAT(std::string(r["endpoint"].GetString()), EndsWith(".sock"));
  EXPECT_EQ(r["devices"].GetUint64(), 2u);
  EXPECT_EQ(r["healthy"].GetUint64(), 2u);
  EXPECT_EQ(r["units"].GetUint64(), 2u);
  EXPECT_EQ(r["replicas"].GetUint64(), 1u);
  EXPECT_THAT(Ids(r), ElementsAre("GPU-0aaa", "GPU-1aaa"));
  EXPECT_FALSE(d.HasMember("cdi"));
  EXPECT_FALSE(d.HasMember("draDevices"));
}

TEST(PlanReportTest, TimeSlicingShowsReplicasPerUnit) {
  auto gen = Build(
      "version: v1\nmode: plugin\nsharing:\n  timeSlicing:\n    resources:\n"
      "    - name: nvidia.com/gpu\n      replicas: 3\n",
      testing::PlainNode(2));
  ASSERT_NE(gen, nullptr);
  EXPECT_THAT(PlanReport(*gen, "text"),
              HasSubstr("  devices:  6 (6 healthy)\n  units:    2 x 3 replicas\n"));
  rapidjson::Document d = Json(PlanReport(*gen, "json"));
  const auto& r = d["resources"][0];
  EXPECT_EQ(r["devices"].GetUint64(), 6u);
  EXPECT_EQ(r["units"].GetUint64(), 2u);
  EXPECT_EQ(r["replicas"].GetUint64(), 3u);
  EXPECT_EQ(Ids(r).size(), 6u);
}

TEST(PlanReportTest, ALostGpuIsAdvertisedButNotHealthy) {
  nvml::Inventory inv = testing::PlainNode(2);
  inv.gpus[1].lost = true;
  auto gen = Build("version: v1\nmode: plugin\n", inv);
  ASSERT_NE(gen, nullptr);
  EXPECT_THAT(PlanReport(*gen, "text"), HasSubstr("  devices:  2 (1 healthy)\n"));
  const YAML::Node y = YAML::Load(PlanReport(*gen, "yaml"));
  EXPECT_EQ(y["resources"][0]["devices"].as<int>(), 2);
  EXPECT_EQ(y["resources"][0]["healthy"].as<int>(), 1);
}

TEST(PlanReportTest, StaticModeHasNoSocketAndMixedMigOneResourcePerProfile) {
  auto gen =
      Build("version: v1\nmode: static\nflags:\n  migStrategy: mixed\n", testing::MixedNode());
  ASSERT_NE(gen, nullptr);
  const std::string text = PlanReport(*gen, "text");
  EXPECT_THAT(text, HasSubstr("(mode static)\n"));
  EXPECT_THAT(text, Not(HasSubstr("endpoint")));

  const YAML::Node y = YAML::Load(PlanReport(*gen, "yaml"));
  EXPECT_EQ(y["mode"].as<std::string>(), "static");
  std::map<std::string, int> devices;
  for (const YAML::Node& r : y["resources"]) {
    EXPECT_FALSE(r["endpoint"]) << r["name"].as<std::string>();
    devices[r["name"].as<std::string>()] = r["devices"].as<int>();
  }
  EXPECT_EQ(devices, (std::map<std::string, int>{{"nvidia.com/gpu", 1},
                                                 {"nvidia.com/mig-1g.10gb", 2},
                                                 {"nvidia.com/mig-2g.20gb", 1}}));
}

TEST(PlanReportTest, AnUnknownFormatIsText) {
  auto gen = Build("version: v1\nmode: plugin\n", testing::PlainNode(1));
  ASSERT_NE(gen, nullptr);
  EXPECT_EQ(PlanReport(*gen, ""), PlanReport(*gen, "text"));
}

}  // namespace
}  // namespace gpu_agent
