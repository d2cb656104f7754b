// `gpu-agent health`'s report (health_report.h) for hand-made verdicts: a
// GPU's word is its worst failing check's configured severity (ignore
// counting for nothing, a lost GPU unhealthy), and the table, JSON and YAML
// carry each check's state, severity, threshold, value and NVML's answers.
#include "agent/cli/health_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>

#include "base/strings.h"

namespace gpu_agent {
namespace {

using health::CheckId;
using health::CheckResult;
using health::CheckState;
using health::Severity;
using ::testing::HasSubstr;

CheckResult Check(CheckId id, CheckState state, std::string value = "", std::string detail = "") {
  CheckResult r;
  r.id = id;
  r.state = state;
  r.value = std::move(value);
  r.detail = std::move(detail);
  return r;
}

GpuHealthReport Gpu(unsigned index, std::vector<CheckResult> results) {
  GpuHealthReport g;
  g.index = index;
  g.uuid = StrCat("GPU-", index, "aaa");
  g.name = "NVIDIA H100 80GB HBM3";
  g.verdict.uuid = g.uuid;
  g.verdict.results = std::move(results);
  return g;
}

// GPU 0 passes; GPU 1 runs hot (temperature, degraded by default) with an
// NVLink off; GPU 2 is lost.
HealthReport Report() {
  HealthReport r;
  r.driver_version = "550.54.15";
  r.settings = health::CheckSettings::Defaults();
  r.poll_calls_per_gpu = 7.5;
  r.gpus.push_back(Gpu(0, {Check(CheckId::kTemperature, CheckState::kPass, "41 C"),
                           Check(CheckId::kRowRemapPending, CheckState::kPass, "0 rows")}));
  CheckResult hot = Check(CheckId::kTemperature, CheckState::kFailing, "88 C", "slowdown at 90 C");
  hot.raw = {{"nvmlDeviceGetTemperature", "88"}, {"slowdown threshold", "Not Supported (3)"}};
  r.gpus.push_back(
      Gpu(1, {hot, Check(CheckId::kNvLink, CheckState::kOff, "", "no NVLink on this GPU")}));
  GpuHealthReport lost = Gpu(2, {});
  lost.verdict.lost = true;
  lost.error = "GPU_IS_LOST";
  r.gpus.push_back(lost);
  return r;
}

TEST(HealthReportTest, AGpusWordIsItsWorstFailingChecksSeverity) {
  HealthReport r = Report();
  EXPECT_EQ(GpuHealthWord(r.gpus[0], r.settings), "healthy");
  EXPECT_EQ(GpuHealthWord(r.gpus[1], r.settings), "degraded");
  EXPECT_EQ(GpuHealthWord(r.gpus[2], r.settings), "unhealthy");

  // Raised to unhealthy by the config: the GPU is unhealthy.
  r.settings[CheckId::kTemperature].severity = Severity::kUnhealthy;
  EXPECT_EQ(GpuHealthWord(r.gpus[1], r.settings), "unhealthy");
  // Ignored: failing still, but the GPU is healthy, and the report says so.
  r.settings[CheckId::kTemperature].severity = Severity::kOk;
  EXPECT_EQ(GpuHealthWord(r.gpus[1], r.settings), "healthy");
  EXPECT_THAT(HealthAsTable(r), HasSubstr("failing (ignored)"));
  // A check that is off or unknown counts for nothing.
  r.gpus[1].verdict.results[1].state = CheckState::kUnknown;
  EXPECT_EQ(GpuHealthWord(r.gpus[1], r.settings), "healthy");
}

TEST(HealthReportTest, TheTableListsEveryCheckOfEveryGpu) {
  const std::string t = HealthAsTable(Report());
  EXPECT_EQ(t.substr(0, t.find('\n')), "Driver 550.54.15, 3 GPU(s)");
  EXPECT_THAT(t, HasSubstr("\nGPU 0  GPU-0aaa  NVIDIA H100 80GB HBM3  healthy\n"));
  EXPECT_THAT(t, HasSubstr("\nGPU 1  GPU-1aaa  NVIDIA H100 80GB HBM3  degraded\n"));
  // Name, state (the failing check's severity), value; detail after it.
  EXPECT_THAT(t, HasSubstr("  temperature  degraded  88 C; slowdown at 90 C\n"));
  EXPECT_THAT(t, HasSubstr("  nvlink       off       no NVLink on this GPU\n"));
  EXPECT_THAT(t, HasSubstr("the GPU has fallen off the bus (GPU_IS_LOST)"));
  EXPECT_THAT(t, HasSubstr("  error: GPU_IS_LOST\n"));
}

TEST(HealthReportTest, JsonCarriesEachChecksSettingsAndNvmlsAnswers) {
  const std::string text = HealthAsJson(Report());
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  ASSERT_FALSE(d.HasParseError()) << text;
  EXPECT_STREQ(d["driverVersion"].GetString(), "550.54.15");
  EXPECT_DOUBLE_EQ(d["nvmlCallsPerGpuPerPoll"].GetDouble(), 7.5);
  ASSERT_EQ(d["gpus"].Size(), 3u);
  const auto& g1 = d["gpus"][1];
  EXPECT_STREQ(g1["health"].GetString(), "degraded");
  EXPECT_FALSE(g1["lost"].GetBool());
  EXPECT_FALSE(g1.HasMember("error"));
  const auto& hot = g1["checks"][0];
  EXPECT_STREQ(hot["check"].GetString(), "temperature");
  EXPECT_STREQ(hot["state"].GetString(), "degraded");
  EXPECT_STREQ(hot["severity"].GetString(), "degraded");
  ASSERT_TRUE(hot.HasMember("threshold"));
  EXPECT_DOUBLE_EQ(hot["threshold"].GetDouble(),
                   health::Spec(CheckId::kTemperature).default_threshold);
  EXPECT_STREQ(hot["value"].GetString(), "88 C");
  EXPECT_STREQ(hot["raw"]["slowdown threshold"].GetString(), "Not Supported (3)");
  // A check without a threshold has none in the report.
  EXPECT_FALSE(d["gpus"][0]["checks"][1].HasMember("threshold"));
  EXPECT_STREQ(d["gpus"][0]["checks"][1]["check"].GetString(), "rowRemapPending");
  EXPECT_TRUE(d["gpus"][2]["lost"].GetBool());
  EXPECT_STREQ(d["gpus"][2]["health"].GetString(), "unhealthy");
  EXPECT_STREQ(d["gpus"][2]["error"].GetString(), "GPU_IS_LOST");
  EXPECT_EQ(d["gpus"][2]["checks"].Size(), 0u);
}

TEST(HealthReportTest, YamlCarriesTheSameAndSurvivesHostileText) {
  HealthReport r = Report();
  r.settings[CheckId::kTemperature].threshold = 2.5;
  r.settings[CheckId::kTemperature].severity = Severity::kOk;
  r.gpus[1].verdict.results[0].detail = "x: [1, {y: \"z\"}] # not a comment";
  const YAML::Node y = YAML::Load(HealthAsYaml(r));
  EXPECT_EQ(y["driverVersion"].as<std::string>(), "550.54.15");
  const YAML::Node hot = y["gpus"][1]["checks"][0];
  EXPECT_EQ(hot["check"].as<std::string>(), "temperature");
  EXPECT_EQ(hot["state"].as<std::string>(), "failing (ignored)");
  EXPECT_EQ(hot["severity"].as<std::string>(), "ignore");
  EXPECT_EQ(hot["threshold"].as<std::string>(), "2.5");
  EXPECT_EQ(hot["detail"].as<std::string>(), "x: [1, {y: \"z\"}] # not a comment");
  EXPECT_EQ(hot["raw"]["nvmlDeviceGetTemperature"].as<std::string>(), "88");
  EXPECT_EQ(y["gpus"][1]["health"].as<std::string>(), "healthy");
  EXPECT_TRUE(y["gpus"][2]["lost"].as<bool>());
}

}  // namespace
}  // namespace gpu_agent
