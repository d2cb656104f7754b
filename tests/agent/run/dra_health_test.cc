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

// What the health ledger makes of each device (TaintsOf): the first outage
// that covers it, with the effect of its cause, else its GPU's first
// degraded check whose effect is not off; a MIG device shares its GPU's.
TEST(DraHealthTaintsTest, EachDeviceTakesTheOutageThatCoversItElseItsGpusFirstDegradedCheck) {
  std::vector<dra::DraDevice> devices(4);
  devices[0].name = "gpu-0";
  devices[0].key = DeviceKey::Gpu("GPU-0");
  devices[1].name = "gpu-1-mig-1";
  devices[1].key = {"GPU-1", 1, 0};
  devices[2].name = "gpu-1-mig-2";
  devices[2].key = {"GPU-1", 2, 0};
  devices[3].name = "gpu-2";
  devices[3].key = DeviceKey::Gpu("GPU-2");
  health::HealthLedger ledger;
  health::HealthChange lost;
  lost.key = DeviceKey::Gpu("GPU-0");
  lost.reason = "XID 79";
  lost.xid = 79;
  ledger.Set(lost);
  health::HealthChange mig;
  mig.key = {"GPU-1", 1, 0};
  mig.reason = "XID 94";
  mig.xid = 94;
  ledger.Set(mig);
  auto degraded = [&](const std::string& uuid, health::CheckId id) {
    health::CheckChange c;
    c.now.uuid = uuid;
    c.now.check = id;
    c.now.level = health::Severity::kDegraded;
    ledger.SetCheck(c);
  };
  degraded("GPU-1", health::CheckId::kTemperature);
  degraded("GPU-2", health::CheckId::kTemperature);
  degraded("GPU-2", health::CheckId::kPcieWidth);
  const DraEffectOf effect_of = [](std::string_view cause) -> std::string {
    if (cause == "lost") return "NoExecute";
    if (cause == "temperature") return "off";
    return "None";
  };
  auto shown = [](const std::map<std::string, DraTaint>& taints) {
    std::map<std::string, std::string> out;
    for (const auto& [name, t] : taints) {
      out[name] = t.taint.key + "=" + t.taint.value + ":" +
                  std::string(dra::TaintEffectName(t.taint.effect)) + (t.published ? "" : " (off)");
    }
    return out;
  };
  const std::string unhealthy = std::string(kDriver) + "/unhealthy";
  EXPECT_EQ(shown(TaintsOf(ledger, devices, kDriver, effect_of)),
            (std::map<std::string, std::string>{
                {"gpu-0", unhealthy + "=XID-79:NoExecute"},
                {"gpu-1-mig-1", unhealthy + "=XID-94:None"},
                // GPU-1's temperature is off; GPU-2's temperature too, so its PCIe width.
                {"gpu-2", std::string(kDriver) + "/degraded=pcieWidth:None"}}));
  // Without effects every cause is NoSchedule; a degraded check stands
  // for each MIG device of its GPU.
  EXPECT_EQ(shown(TaintsOf(ledger, devices, kDriver, nullptr)).at("gpu-1-mig-2"),
            std::string(kDriver) + "/degraded=temperature:NoSchedule");
}

}  // namespace
}  // namespace gpu_agent
