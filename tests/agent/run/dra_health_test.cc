// What DRA mode publishes of its devices' health (SlicesOf): each device
// with its taint where the API server keeps taints, a None taint only where
// it serves that effect; otherwise, and where dra.taints says off, a device
// whose taint keeps claims away leaves the slices and an informational one
// stays untainted.
#include "agent/run/dra_health.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <set>

namespace gpu_agent {
namespace {

constexpr char kDriver[] = "gpu.gpu-agent.github.io";

// Device name -> its taint as "key=value:effect" ("" for none), of the
// slices `builder` makes for `context`.
std::map<std::string, std::string> Published(const dra::SliceBuilder& builder,
                                             const dra::SliceContext& context) {
  std::map<std::string, std::string> out;
  for (const std::string& json : builder(context)) {
    rapidjson::Document d;
    d.Parse(json.c_str());
    for (const auto& dev : d["spec"]["devices"].GetArray()) {
      std::string taint;
      if (dev.HasMember("taints")) {
        const auto& t = dev["taints"][0];
        taint = std::string(t["key"].GetString()) + "=" + t["value"].GetString() + ":" +
                t["effect"].GetString();
      }
      out[dev["name"].GetString()] = taint;
    }
  }
  return out;
}

TEST(DraHealthSlicesTest, EachTaintWhereTheServerKeepsItElseTheDeviceLeavesOrStaysUntainted) {
  std::vector<dra::DraDevice> devices(4);
  for (int i = 0; i < 4; ++i) devices[i].name = "gpu-" + std::to_string(i);
  const std::string unhealthy = std::string(kDriver) + "/unhealthy";
  std::map<std::string, DraTaint> taints = {
      {"gpu-0", {{unhealthy, "XID-79", dra::TaintEffect::kNoExecute}, true}},
      {"gpu-1",
       {{std::string(kDriver) + "/degraded", "temperature", dra::TaintEffect::kNone}, true}},
      // dra.taints: off for its cause.
      {"gpu-2", {{unhealthy, "XID-48", dra::TaintEffect::kNoSchedule}, false}},
  };
  const dra::SliceBuilder b = SlicesOf(devices, taints, kDriver, "node-a");
  dra::SliceContext c;
  c.device_taints = true;
  c.none_taint_effect = true;  // 1.36
  EXPECT_EQ(Published(b, c), (std::map<std::string, std::string>{
                                 {"gpu-0", unhealthy + "=XID-79:NoExecute"},
                                 {"gpu-1", std::string(kDriver) + "/degraded=temperature:None"},
                                 {"gpu-3", ""}}));
  c.none_taint_effect = false;  // 1.33 to 1.35
  EXPECT_EQ(Published(b, c),
            (std::map<std::string, std::string>{
                {"gpu-0", unhealthy + "=XID-79:NoExecute"}, {"gpu-1", ""}, {"gpu-3", ""}}));
  c.device_taints = false;  // DRADeviceTaints off
  EXPECT_EQ(Published(b, c), (std::map<std::string, std::string>{{"gpu-1", ""}, {"gpu-3", ""}}));
}

}  // namespace
}  // namespace gpu_agent
