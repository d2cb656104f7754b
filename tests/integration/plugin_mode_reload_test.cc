// Plugin mode, signals and reloads: SIGTERM and SIGINT finish cleanly,
// SIGHUP reloads and re-registers, GPUs out of service stay out across a
// reload, and a seeded mix of reloads, kubelet restarts and dropped
// streams always ends registered.
// The fixture: plugin_mode_fixture.h.
#include <gtest/gtest.h>
#include <signal.h>

#include <random>
#include <string>

#include "integration/plugin_mode_fixture.h"

namespace gpu_agent::testing {
namespace {

TEST_F(PluginModeTest, SigtermFinishesCleanly) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  ASSERT_TRUE(Exists(dir_.Join("nvidia-gpu.sock")));
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Dump();
  EXPECT_FALSE(Exists(dir_.Join("nvidia-gpu.sock")));
  EXPECT_NE(agent_->Stderr().find("shutting down signal=SIGTERM"), std::string::npos);
}

TEST_F(PluginModeTest, SigintFinishesCleanly) {
  StartAgent();
  ASSERT_TRUE(Registered());
  agent_->Signal(SIGINT);
  EXPECT_EQ(agent_->Wait(), 0) << Dump();
  EXPECT_FALSE(Exists(dir_.Join("nvidia-gpu.sock")));
}

TEST_F(PluginModeTest, SighupReloadsConfigAndReRegisters) {
  const std::string config = dir_.Write("c.yaml", "version: v1\n");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  dir_.Write("c.yaml", R"(version: v1
flags:
  plugin:
    deviceIDStrategy: index
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 3
)");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(Registered(2)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) {
    return d.size() == 24 && d[0].id() == "0::0" && d[23].id() == "7::2";
  })) << Dump();
  // A broken config on SIGHUP keeps the running one.
  dir_.Write("c.yaml", "version: v1\nflags:\n  migStrategy: bogus\n");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(agent_->WaitForStderr("config reload failed; keeping the running config"));
  EXPECT_TRUE(agent_->Running());
  EXPECT_EQ(sim_.Devices(kGpu).size(), 24u);
}

// A GPU off the bus answers GPU_IS_LOST even for its handle, so a reload's
// re-discovery cannot read its UUID: it stays advertised (unhealthy) as it
// was known, and comes back when it is reset (found by the soak: it used to
// leave the node until the agent restarted).
TEST_F(PluginModeTest, GpuOffTheBusStaysAdvertisedAcrossAReloadAndReturnsWhenReset) {
  const std::string config = dir_.Write("c.yaml", "version: v1\n");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
  Nvml("xid 3 79");
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 7, std::chrono::seconds(10))) << Dump();
  const int before = sim_.registrations();
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(sim_.WaitForRegistrations(before + 1)) << Dump();
  ASSERT_TRUE(sim_.WaitForOldClientsDone(std::chrono::seconds(10)));
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) {
    return d.size() == 8 && CountHealthy(d) == 7;
  })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  for (const auto& d : sim_.Devices(kGpu)) {
    EXPECT_EQ(d.health(), d.id() == uuids[3] ? "Unhealthy" : "Healthy") << d.id();
  }
  Nvml("reset 3");
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
}

// A GPU that needs a reset stays out across a SIGHUP reload (the new
// generation starts with it out), and SIGUSR1, an operator's word, brings
// back what NVML cannot show was reset.
TEST_F(PluginModeTest, GpuNeedingAResetStaysOutAcrossAReloadUntilAnOperatorVouches) {
  const std::string config = dir_.Write("c.yaml", "version: v1\n");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }))
      << Dump();
  Nvml("xid 2 48");  // double-bit ECC: NVML answers, a row remap is pending
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 7; }))
      << Dump();
  // A probe found it answering but still needing the reset.
  ASSERT_TRUE(agent_->WaitForStderr("still needs a reset")) << Dump();
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(Registered(2)) << Dump();
  ASSERT_TRUE(agent_->WaitForStderr("reload done")) << Dump();
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }, std::chrono::seconds(1)))
      << "the reload brought back a GPU that needs a reset\n"
      << Dump();
  EXPECT_EQ(CountHealthy(sim_.Devices(kGpu)), 7);
  // GPU 5's NVML shows no sign of a reset either way.
  for (const char* fn : {"nvmlDeviceGetFieldValues", "nvmlDeviceGetRemappedRows",
                         "nvmlDeviceGetRetiredPagesPendingStatus"}) {
    Nvml(std::string("fail 5 ") + fn + " 3");
  }
  Nvml("xid 5 74");  // NVLink error
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 6; }))
      << Dump();
  agent_->Signal(SIGUSR1);
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }))
      << Dump();
  EXPECT_NE(Dump().find("an operator vouched for it (SIGUSR1)"), std::string::npos) << Dump();
  EXPECT_TRUE(agent_->Running());
}

std::string Tail(const std::string& s, size_t n = 6000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// What kubelets 1.25 to 1.34 do (see kubelet_simulator.h) and the old
// registration did not survive: when any stream of a resource ends, the
// kubelet drops the CURRENT client, so a registration that overtakes the end
// of the previous generation's stream is dropped at once, and the resource
// stays at 0 until the plugin registers again. A seeded random mix of
// SIGHUP reloads (alternating configs), kubelet restarts and streams the
// kubelet drops; after each, the kubelet's allocatable must be the fixture's
// within 2 s.
TEST_F(PluginModeTest, ReloadsRestartsAndDroppedStreamsAlwaysEndRegistered) {
  if (sim_.profile() != KubeletSimulator::Profile::k1_25) {
    GTEST_SKIP() << "the race is a kubelet 1.25+ one";
  }
  uint32_t seed = 20261123;
  if (const char* v = std::getenv("RACE_SEED")) seed = static_cast<uint32_t>(std::stoul(v));
  std::printf("seed %u (RACE_SEED=%u repeats this run)\n", seed, seed);
  const std::string a = "version: v1\n";
  const std::string b = R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
)";
  const std::string config = dir_.Write("c.yaml", a);
  // A shorter grace than the default 1 s keeps the 200 steps quick.
  StartAgent({"--config", config, "--stream-grace-period", "300ms"});
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
  std::mt19937 rng(seed);
  bool on_b = false;
  int counts[3] = {0, 0, 0};
  for (int step = 0; step < 200; ++step) {
    const int action = static_cast<int>(rng() % 3);
    const char* names[] = {"SIGHUP", "kubelet restart", "stream dropped by the kubelet"};
    ++counts[action];
    const int before = sim_.registrations();
    switch (action) {
      case 0:
        on_b = !on_b;
        dir_.Write("c.yaml", on_b ? b : a);
        agent_->Signal(SIGHUP);
        break;
      case 1:
        ASSERT_TRUE(sim_.Restart());
        break;
      default:
        sim_.DisconnectCurrent(kGpu);
        break;
    }
    const int want = on_b ? 16 : 8;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    auto left = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
    };
    // Registered again, every older stream's end seen by the kubelet (its
    // late end is what drops the new client), and then the value right:
    // nothing can take it away after that but the next step.
    const bool registered = sim_.WaitForRegistrations(before + 1, std::chrono::seconds(2));
    const bool settled = registered && sim_.WaitForOldClientsDone(left());
    const bool allocatable = settled && sim_.WaitForAllocatable(kGpu, want, left());
    ASSERT_TRUE(allocatable) << "seed " << seed << ", step " << step << " (" << names[action]
                             << "): "
                             << (!registered ? "not registered again"
                                 : !settled  ? "an older stream still open"
                                             : "registered")
                             << ", allocatable " << sim_.Allocatable(kGpu) << ", want " << want
                             << "\n"
                             << Tail(Dump());
  }
  EXPECT_EQ(sim_.max_concurrent_registrations(), 1) << "two Register calls in flight at once";
  std::printf("steps: %d SIGHUP, %d kubelet restarts, %d dropped streams; %d registrations\n",
              counts[0], counts[1], counts[2], sim_.registrations());
}

}  // namespace
}  // namespace gpu_agent::testing
