#include "agent/cli/health_report.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "base/strings.h"

namespace gpu_agent {
namespace {

using health::CheckResult;
using health::CheckState;

// The state a report shows: "failing" becomes the severity it carries.
std::string StateWord(const CheckResult& r, const health::CheckSettings& s) {
  if (r.state != CheckState::kFailing) return std::string(health::CheckStateName(r.state));
  const health::Severity sev = s[r.id].severity;
  return sev == health::Severity::kOk ? "failing (ignored)"
                                      : std::string(health::SeverityName(sev));
}

std::string ThresholdText(const health::CheckSpec& spec, const health::CheckSetting& set) {
  if (!spec.has_threshold) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", set.threshold);
  return buf;
}

}  // namespace

std::string GpuHealthWord(const GpuHealthReport& gpu, const health::CheckSettings& settings) {
  if (gpu.verdict.lost) return "unhealthy";
  health::Severity worst = health::Severity::kOk;
  for (const CheckResult& r : gpu.verdict.results) {
    if (r.state == CheckState::kFailing) worst = std::max(worst, settings[r.id].severity);
  }
  return worst == health::Severity::kOk ? "healthy" : std::string(health::SeverityName(worst));
}

std::string HealthAsTable(const HealthReport& r) {
  std::string out = StrCat("Driver ", r.driver_version.empty() ? "?" : r.driver_version, ", ",
                           r.gpus.size(), " GPU(s)\n");
  for (const GpuHealthReport& g : r.gpus) {
    StrAppend(&out, "\nGPU ", g.index, "  ", g.uuid, "  ", g.name, "  ",
              GpuHealthWord(g, r.settings), "\n");
    if (g.verdict.lost) StrAppend(&out, "  the GPU has fallen off the bus (GPU_IS_LOST)\n");
    if (!g.error.empty()) StrAppend(&out, "  error: ", g.error, "\n");
    std::vector<std::vector<std::string>> rows;
    for (const CheckResult& c : g.verdict.results) {
      const health::CheckSpec& spec = health::Spec(c.id);
      std::string what = c.value;
      if (!c.detail.empty()) StrAppend(&what, what.empty() ? "" : "; ", c.detail);
      rows.push_back({std::string(spec.name), StateWord(c, r.settings), what});
    }
    size_t w0 = 0, w1 = 0;
    for (const auto& row : rows) {
      w0 = std::max(w0, row[0].size());
      w1 = std::max(w1, row[1].size());
    }
    for (const auto& row : rows) {
      StrAppend(&out, "  ", row[0], std::string(w0 - row[0].size() + 2, ' '), row[1],
                std::string(w1 - row[1].size() + 2, ' '), row[2], "\n");
    }
  }
  return out;
}

std::string HealthAsJson(const HealthReport& r) {
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.SetIndent(' ', 2);
  auto str = [&](const std::string& s) { w.String(s.c_str(), static_cast<unsigned>(s.size())); };
  w.StartObject();
  w.Key("driverVersion");
  str(r.driver_version);
  w.Key("nvmlCallsPerGpuPerPoll");
  w.Double(r.poll_calls_per_gpu);
  w.Key("gpus");
  w.StartArray();
  for (const GpuHealthReport& g : r.gpus) {
    w.StartObject();
    w.Key("index");
    w.Uint(g.index);
    w.Key("uuid");
    str(g.uuid);
    w.Key("name");
    str(g.name);
    w.Key("health");
    str(GpuHealthWord(g, r.settings));
    w.Key("lost");
    w.Bool(g.verdict.lost);
    if (!g.error.empty()) {
      w.Key("error");
      str(g.error);
    }
    w.Key("checks");
    w.StartArray();
    for (const CheckResult& c : g.verdict.results) {
      const health::CheckSpec& spec = health::Spec(c.id);
      w.StartObject();
      w.Key("check");
      str(std::string(spec.name));
      w.Key("state");
      str(StateWord(c, r.settings));
      w.Key("severity");
      str(std::string(health::SeveritySettingName(r.settings[c.id].severity)));
      if (spec.has_threshold) {
        w.Key("threshold");
        w.Double(r.settings[c.id].threshold);
      }
      w.Key("value");
      str(c.value);
      w.Key("detail");
      str(c.detail);
      w.Key("raw");
      w.StartObject();
      for (const auto& [query, answer] : c.raw) {
        w.Key(query.c_str(), static_cast<unsigned>(query.size()));
        str(answer);
      }
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize()) + "\n";
}

std::string HealthAsYaml(const HealthReport& r) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "driverVersion" << YAML::Value << r.driver_version
    << YAML::Key << "nvmlCallsPerGpuPerPoll" << YAML::Value << r.poll_calls_per_gpu << YAML::Key
    << "gpus" << YAML::Value << YAML::BeginSeq;
  for (const GpuHealthReport& g : r.gpus) {
    e << YAML::BeginMap << YAML::Key << "index" << YAML::Value << g.index << YAML::Key << "uuid"
      << YAML::Value << g.uuid << YAML::Key << "name" << YAML::Value << g.name << YAML::Key
      << "health" << YAML::Value << GpuHealthWord(g, r.settings) << YAML::Key << "lost"
      << YAML::Value << g.verdict.lost;
    if (!g.error.empty()) e << YAML::Key << "error" << YAML::Value << g.error;
    e << YAML::Key << "checks" << YAML::Value << YAML::BeginSeq;
    for (const CheckResult& c : g.verdict.results) {
      const health::CheckSpec& spec = health::Spec(c.id);
      e << YAML::BeginMap << YAML::Key << "check" << YAML::Value << std::string(spec.name)
        << YAML::Key << "state" << YAML::Value << StateWord(c, r.settings) << YAML::Key
        << "severity" << YAML::Value
        << std::string(health::SeveritySettingName(r.settings[c.id].severity));
      if (spec.has_threshold) {
        e << YAML::Key << "threshold" << YAML::Value << ThresholdText(spec, r.settings[c.id]);
      }
      e << YAML::Key << "value" << YAML::Value << c.value << YAML::Key << "detail" << YAML::Value
        << c.detail << YAML::Key << "raw" << YAML::Value << YAML::BeginMap;
      for (const auto& [query, answer] : c.raw) e << YAML::Key << query << YAML::Value << answer;
      e << YAML::EndMap << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace gpu_agent
