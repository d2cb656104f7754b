// The kubelet stand-in's Node figures when a device plugin goes, as a real
// 1.36 kubelet gives them (docs/handover.md): allocatable 0 at once, the
// capacity kept for the endpoint's stop grace period, then 0; a plugin that
// registers again within the grace period brings both back.
#include "kubelet_simulator.h"

#include <gtest/gtest.h>

#include "deviceplugin/plugin_supervisor.h"
#include "support/test_support.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kGpu = "nvidia.com/gpu";

// A plugin of `n` GPUs, in process, registered with `sim`.
std::unique_ptr<deviceplugin::PluginSupervisor> Plugin(const KubeletSimulator& sim, int n) {
  deviceplugin::ResourceSpec spec;
  spec.resource_name = kGpu;
  spec.endpoint = "gpu.sock";
  spec.link_score.assign(n, std::vector<int>(n, 0));
  for (int g = 0; g < n; ++g) {
    deviceplugin::PluginDevice d;
    d.id = d.gpu_id = d.key.uuid = "GPU-" + std::to_string(g);
    d.physical = g;
    spec.devices.push_back(std::move(d));
  }
  deviceplugin::SupervisorOptions o;
  o.kubelet_socket = sim.socket();
  std::vector<deviceplugin::ResourceRuntime> resources = {
      {std::make_shared<deviceplugin::DevicePublisher>(spec),
       std::make_shared<const deviceplugin::Allocator>(deviceplugin::AllocateOptions{})}};
  auto sup = deviceplugin::PluginSupervisor::Start(o, std::move(resources));
  EXPECT_TRUE(sup.ok()) << sup.status();
  return sup.ok() ? *std::move(sup) : nullptr;
}

// Until the kubelet has seen the plugin's stream end `n` times.
bool Disconnected(const KubeletSimulator& sim, int n) {
  return WaitFor([&] { return sim.Disconnects(kGpu) >= n; }, std::chrono::seconds(10));
}

TEST(KubeletSimulatorTest, AStoppedPluginsCapacityStaysForTheGracePeriodItsAllocatableNot) {
  TempDir dir;
  KubeletSimulator sim(dir.path());
  EXPECT_EQ(sim.Capacity(kGpu), 0) << "no plugin yet";
  sim.SetEndpointStopGracePeriod(std::chrono::seconds(2));
  ASSERT_TRUE(sim.Start());
  auto plugin = Plugin(sim, 4);
  ASSERT_NE(plugin, nullptr);
  ASSERT_TRUE(sim.WaitForAllocatable(kGpu, 4, std::chrono::seconds(10)));
  EXPECT_EQ(sim.Capacity(kGpu), 4);

  const auto stopped = std::chrono::steady_clock::now();
  plugin->Stop();
  ASSERT_TRUE(Disconnected(sim, 1));
  EXPECT_EQ(sim.Allocatable(kGpu), 0);
  if (std::chrono::steady_clock::now() - stopped < std::chrono::milliseconds(1500)) {
    EXPECT_EQ(sim.Capacity(kGpu), 4) << "capacity kept within the grace period";
  }
  ASSERT_TRUE(sim.WaitForCapacity(kGpu, 0, std::chrono::seconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - stopped, std::chrono::seconds(2));
  EXPECT_EQ(sim.Allocatable(kGpu), 0);
}

TEST(KubeletSimulatorTest, APluginBackWithinTheGracePeriodHasItsCapacityAndAllocatableAgain) {
  TempDir dir;
  KubeletSimulator sim(dir.path());
  sim.SetEndpointStopGracePeriod(std::chrono::minutes(5));  // the kubelet's
  ASSERT_TRUE(sim.Start());
  auto plugin = Plugin(sim, 2);
  ASSERT_NE(plugin, nullptr);
  ASSERT_TRUE(sim.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  plugin->Stop();
  ASSERT_TRUE(Disconnected(sim, 1));
  EXPECT_EQ(sim.Allocatable(kGpu), 0);
  EXPECT_EQ(sim.Capacity(kGpu), 2);
  plugin = Plugin(sim, 2);
  ASSERT_NE(plugin, nullptr);
  ASSERT_TRUE(sim.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  EXPECT_EQ(sim.Capacity(kGpu), 2);
}

}  // namespace
}  // namespace gpu_agent::testing
