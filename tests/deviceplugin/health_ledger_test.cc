#include "deviceplugin/health_ledger.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/device_key.h"
#include "deviceplugin/device.h"

namespace gpu_agent::deviceplugin {
namespace {

// GPU-0 whole with two replicas, and two MIG devices (GPU instances 1 and 2)
// on GPU-1.
std::vector<PluginDevice> Devices() {
  std::vector<PluginDevice> out;
  for (int n = 0; n < 2; ++n) {
    PluginDevice d;
    d.id = "GPU-0::" + std::to_string(n);
    d.key = DeviceKey::Gpu("GPU-0");
    out.push_back(d);
  }
  for (int gi : {1, 2}) {
    PluginDevice d;
    d.id = "MIG-" + std::to_string(gi);
    d.key = {"GPU-1", gi, 0};
    out.push_back(d);
  }
  return out;
}

std::string Health(const std::vector<PluginDevice>& devices) {
  std::string out;
  for (const PluginDevice& d : devices) out += d.healthy ? "H" : "U";
  return out;
}

TEST(ApplyHealthTest, MarksEveryDeviceAnOutageCovers) {
  std::vector<PluginDevice> devices = Devices();
  health::HealthLedger ledger;
  EXPECT_FALSE(ApplyHealth(ledger, &devices));  // nothing out, all healthy already
  ledger.Set(DeviceKey::Gpu("GPU-0"), false);
  EXPECT_TRUE(ApplyHealth(ledger, &devices));
  EXPECT_EQ(Health(devices), "UUHH");  // both replicas go
  EXPECT_FALSE(ApplyHealth(ledger, &devices));
  ledger.Set({"GPU-1", 2, 0}, false);  // an instance-scoped XID
  EXPECT_TRUE(ApplyHealth(ledger, &devices));
  EXPECT_EQ(Health(devices), "UUHU");
  ledger.Set(DeviceKey::Gpu("GPU-1"), false);  // the GPU under it
  ledger.Set(DeviceKey::Gpu("GPU-0"), true);
  EXPECT_TRUE(ApplyHealth(ledger, &devices));
  EXPECT_EQ(Health(devices), "HHUU");
  ledger.Set(DeviceKey::Gpu("GPU-1"), true);  // the instance stays out
  EXPECT_TRUE(ApplyHealth(ledger, &devices));
  EXPECT_EQ(Health(devices), "HHHU");
  EXPECT_TRUE(ledger.Healthy(devices[2].key));
  EXPECT_FALSE(ledger.Healthy(devices[3].key));
}

TEST(ApplyHealthTest, OverridesHealthFromDiscovery) {
  std::vector<PluginDevice> devices = Devices();
  devices[0].healthy = devices[1].healthy = false;  // GPU-0 lost at discovery
  health::HealthLedger ledger;
  ledger.Set(DeviceKey::Gpu("GPU-0"), false);  // the watcher reports it
  EXPECT_FALSE(ApplyHealth(ledger, &devices));
  ledger.Set(DeviceKey::Gpu("GPU-0"), true);  // and its return
  EXPECT_TRUE(ApplyHealth(ledger, &devices));
  EXPECT_EQ(Health(devices), "HHHH");
}

TEST(CountHealthyTest, CountsDevicesMarkedHealthy) {
  std::vector<PluginDevice> devices = Devices();
  EXPECT_EQ(CountHealthy({}), 0u);
  EXPECT_EQ(CountHealthy(devices), 4u);
  devices[1].healthy = false;
  devices[3].healthy = false;
  EXPECT_EQ(CountHealthy(devices), 2u);
}

}  // namespace
}  // namespace gpu_agent::deviceplugin
