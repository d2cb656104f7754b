#include "agent/run/desired_capacities.h"

#include <gtest/gtest.h>

#include <string>

#include "base/device_key.h"
#include "deviceplugin/device.h"
#include "health/health_watcher.h"

namespace gpu_agent {
namespace {

using deviceplugin::PluginDevice;
using deviceplugin::ResourceSpec;

PluginDevice Device(const std::string& id, DeviceKey key, bool healthy = true) {
  PluginDevice d;
  d.id = d.gpu_id = id;
  d.key = std::move(key);
  d.healthy = healthy;
  return d;
}

// GPU-0 and GPU-1 time-sliced into two replicas each under nvidia.com/gpu;
// GPU-2 split into MIG GPU instances 1 and 2 under a MIG resource; and a
// resource with no device.
DeviceModel Model() {
  DeviceModel model;
  model.gpu_uuids = {"GPU-0", "GPU-1", "GPU-2"};
  return model;
}

ResourcePlan Plan() {
  ResourcePlan plan;
  ResourceSpec gpus;
  gpus.resource_name = "nvidia.com/gpu";
  for (const char* uuid : {"GPU-0", "GPU-1"}) {
    for (int n = 0; n < 2; ++n) {
      gpus.devices.push_back(
          Device(std::string(uuid) + "::" + std::to_string(n), DeviceKey::Gpu(uuid)));
    }
  }
  ResourceSpec mig;
  mig.resource_name = "nvidia.com/mig-1g.10gb";
  mig.devices.push_back(Device("MIG-1", {"GPU-2", 1, 0}));
  mig.devices.push_back(Device("MIG-2", {"GPU-2", 2, 0}));
  ResourceSpec none;
  none.resource_name = "nvidia.com/mig-3g.40gb";
  plan.resources = {gpus, mig, none};
  return plan;
}

health::HealthChange Change(DeviceKey key, bool healthy) {
  health::HealthChange c;
  c.key = std::move(key);
  c.healthy = healthy;
  c.reason = healthy ? "recovered" : "XID 79";
  return c;
}

const apiserver::Capacities kAll = {
    {"nvidia.com/gpu", 4}, {"nvidia.com/mig-1g.10gb", 2}, {"nvidia.com/mig-3g.40gb", 0}};

TEST(DesiredCapacitiesTest, CountsEveryResourceOfThePlan) {
  DesiredCapacities d(Model(), Plan());
  EXPECT_EQ(d.Value(), kAll);
  EXPECT_EQ(d.uuids(), (std::vector<std::string>{"GPU-0", "GPU-1", "GPU-2"}));
}

TEST(DesiredCapacitiesTest, AGpuOutTakesItsReplicasAndInstances) {
  DesiredCapacities d(Model(), Plan());
  apiserver::Capacities want = kAll;
  want["nvidia.com/gpu"] = 2;
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-1"), false)), want);
  want["nvidia.com/mig-1g.10gb"] = 0;
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-2"), false)), want);
  EXPECT_EQ(d.Value(), want);
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-1"), true)).at("nvidia.com/gpu"), 4);
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-2"), true)), kAll);
}

TEST(DesiredCapacitiesTest, InstanceAndGpuOutagesAreKeptApart) {
  DesiredCapacities d(Model(), Plan());
  const std::string mig = "nvidia.com/mig-1g.10gb";
  EXPECT_EQ(d.Apply(Change({"GPU-2", 2, 0}, false)).at(mig), 1);  // an instance-scoped XID
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-2"), false)).at(mig), 0);
  // The GPU recovers; the instance is still out.
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-2"), true)).at(mig), 1);
  EXPECT_EQ(d.Apply(Change({"GPU-2", 1, DeviceKey::kWhole}, false)).at(mig), 0);
  EXPECT_EQ(d.Apply(Change({"GPU-2", 2, 0}, true)).at(mig), 1);  // GPU instance 1 is still out
  EXPECT_EQ(d.Apply(Change({"GPU-2", 1, DeviceKey::kWhole}, true)).at(mig), 2);
}

TEST(DesiredCapacitiesTest, AGpuLostAtDiscoveryIsOutUntilTheWatcherSaysItCameBack) {
  ResourcePlan plan = Plan();
  DeviceModel model = Model();
  model.initially_unhealthy = {"GPU-0"};
  for (PluginDevice& dev : plan.resources[0].devices) dev.healthy = dev.key.uuid != "GPU-0";
  DesiredCapacities d(model, plan);
  EXPECT_EQ(d.initially_unhealthy(), model.initially_unhealthy);
  EXPECT_EQ(d.Value().at("nvidia.com/gpu"), 2);
  // The watcher reports it out at start, then back once NVML shows a reset.
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-0"), false)).at("nvidia.com/gpu"), 2);
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-0"), true)), kAll);
}

TEST(DesiredCapacitiesTest, ARepeatedReportChangesNothing) {
  DesiredCapacities d(Model(), Plan());
  const apiserver::Capacities once = d.Apply(Change(DeviceKey::Gpu("GPU-0"), false));
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-0"), false)), once);
  EXPECT_EQ(d.Apply(Change(DeviceKey::Gpu("GPU-3"), true)), once);  // never out: no change
}

}  // namespace
}  // namespace gpu_agent
