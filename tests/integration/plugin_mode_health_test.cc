// Plugin mode, device health: XIDs, lost GPUs and resets as the kubelet
// sees them in ListAndWatch, and the NVIDIA env vars that turn checks off.
// The fixture: plugin_mode_fixture.h.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "api_server_stub.h"
#include "integration/plugin_mode_fixture.h"

namespace gpu_agent::testing {
namespace {

TEST_F(PluginModeTest, XidTakesGpuAndItsReplicasOutUntilTheGpuIsReset) {
  const std::string config = dir_.Write("ts.yaml", R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
)");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 16; })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  Nvml("xid 1 13");  // an application error: ignored by default
  Nvml("xid 3 79");  // fallen off the bus
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 14; }))
      << Dump();
  for (const auto& d : sim_.Devices(kGpu)) {
    const bool gpu3 = d.id().rfind(uuids[3] + "::", 0) == 0;
    EXPECT_EQ(d.health(), gpu3 ? "Unhealthy" : "Healthy") << d.id();
  }
  // Off the bus needs a reset: quiet periods (300 ms) pass, GPU 3 stays out.
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) == 16; }, std::chrono::seconds(1)));
  Nvml("reset 3");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 16; }))
      << Dump();
  // XID 13 on GPU 1 never showed in any update.
  for (const auto& u : sim_.Updates(kGpu)) {
    for (const auto& d : u.devices) {
      if (d.id().rfind(uuids[1], 0) == 0) {
        EXPECT_EQ(d.health(), "Healthy");
      }
    }
  }
}

// A polled check failing at severity unhealthy takes the GPU out as an XID
// does, every replica of it; it comes back once the check passes. A
// degraded check leaves the GPU in and says so.
TEST_F(PluginModeTest, AnUnhealthyCheckTakesTheGpuAndItsReplicasOut) {
  const std::string config = dir_.Write("ts.yaml", R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
health:
  pollInterval: 1s
  checks:
    temperature:
      severity: unhealthy
)");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 16; })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  Nvml("set 3 temperature 95");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 14; }))
      << Dump();
  for (const auto& d : sim_.Devices(kGpu)) {
    const bool gpu3 = d.id().rfind(uuids[3] + "::", 0) == 0;
    EXPECT_EQ(d.health(), gpu3 ? "Unhealthy" : "Healthy") << d.id();
  }
  ASSERT_TRUE(agent_->WaitForStderr("health check temperature: 95 C")) << Dump();
  Nvml("set 5 pcieWidth 8");  // degraded by default: shown, still allocatable
  ASSERT_TRUE(agent_->WaitForStderr("x8 of x16")) << Dump();
  EXPECT_EQ(CountHealthy(sim_.Devices(kGpu)), 14);
  Nvml("set 3 temperature 60");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 16; }))
      << Dump();
}

// Plugin mode has no API connection unless given one: events and the
// condition are off by default, and it says so; health.nodeEvents: on with a
// connection sends them.
TEST_F(PluginModeTest, NodeEventsAreOffUnlessAnApiConnectionIsGiven) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  ASSERT_TRUE(
      agent_->WaitForStderr("GPU health events on the Node and its GpuHealthy condition "
                            "are off"))
      << Dump();
  EXPECT_NE(Dump().find("health.nodeEvents: on"), std::string::npos) << Dump();
}

TEST_F(PluginModeTest, NodeEventsOnSendsThemThroughTheGivenConnection) {
  ApiServerStub api;
  api.AddNode("gpu-node-1");
  StartAgent({"--health-node-events", "on", "--node-name", "gpu-node-1", "--proxy=" + api.url()});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  Nvml("xid 4 79");
  ASSERT_TRUE(WaitFor([&] { return api.events().size() == 1; })) << Dump();
  EXPECT_NE(api.events()[0].find("GPU 4 (GPU-"), std::string::npos) << api.events()[0];
  ASSERT_TRUE(WaitFor([&] { return api.Condition("gpu-node-1", "GpuHealthy") != ""; })) << Dump();
  // What components/node-health's ClusterRole grants, and no more.
  std::set<std::string> granted;
  for (const YAML::Node& d :
       YAML::LoadAll(ReadFile(SourceDir() + "/manifests/components/node-health/rbac.yaml"))) {
    if (d["kind"].as<std::string>() != "ClusterRole") continue;
    for (const YAML::Node& rule : d["rules"]) {
      for (const YAML::Node& res : rule["resources"]) {
        for (const YAML::Node& verb : rule["verbs"]) {
          granted.insert(verb.as<std::string>() + " " + res.as<std::string>());
        }
      }
    }
  }
  EXPECT_EQ(api.calls(), granted);
}

TEST_F(PluginModeTest, LostGpuStaysUnhealthyUntilItIsReset) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  Nvml("lose 6");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 7; }));
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) == 8; },
      std::chrono::milliseconds(1000)));
  Nvml("reset 6");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }));
}

TEST_F(PluginModeTest, HealthChecksDisabledByNvidiaEnvVar) {
  StartAgent({}, FixturePath("8-gpu-nvlink.yaml"), {{"DP_DISABLE_HEALTHCHECKS", "all"}});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  ASSERT_TRUE(agent_->WaitForStderr("health checks are disabled"));
  Nvml("xid 0 79");
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) < 8; }, std::chrono::milliseconds(500)));
}

// With XID health checks off, a GPU NVML calls lost at discovery is still
// out (the health watcher reports it even then: it is the one source).
TEST_F(PluginModeTest, GpuLostAtDiscoveryStaysOutWithHealthChecksOff) {
  std::string text = ReadFile(FixturePath("8-gpu-nvlink.yaml"));
  const size_t at = text.find("  - uuid: ");
  ASSERT_NE(at, std::string::npos);
  const size_t eol = text.find('\n', at);
  text.insert(eol + 1, "    fail:\n      nvmlDeviceGetMinorNumber: 15\n");
  StartAgent({}, dir_.Write("lost.yaml", text), {{"DP_DISABLE_HEALTHCHECKS", "all"}});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  EXPECT_EQ(CountHealthy(sim_.Devices(kGpu)), 7) << Dump();
  // An XID elsewhere is not watched, and does not bring the lost GPU back.
  Nvml("xid 3 79");
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) != 7; }, std::chrono::milliseconds(500)));
}

}  // namespace
}  // namespace gpu_agent::testing
