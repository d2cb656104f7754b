// The fixture of the plugin-mode tests (plugin_mode_*_test.cc, one binary):
// the real gpu-agent binary in plugin mode against the kubelet simulator on
// real unix sockets, with the NVML stand-in driven through its FIFO.
#ifndef GPU_AGENT_TESTS_INTEGRATION_PLUGIN_MODE_FIXTURE_H_
#define GPU_AGENT_TESTS_INTEGRATION_PLUGIN_MODE_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fixture.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {

using Devices = std::vector<v1beta1::Device>;
inline constexpr const char* kGpu = "nvidia.com/gpu";

inline std::vector<std::string> FixtureUuids(const std::string& fixture) {
  fake_nvml::Fixture fx;
  std::string error;
  EXPECT_TRUE(fake_nvml::LoadFixture(fixture, &fx, &error)) << error;
  std::vector<std::string> out;
  for (const auto& g : fx.gpus) out.push_back(g.uuid);
  return out;
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

inline int CountHealthy(const Devices& d) {
  int n = 0;
  for (const auto& x : d) n += x.health() == "Healthy";
  return n;
}

class PluginModeTest : public ::testing::Test {
 protected:
  PluginModeTest() : sim_(dir_.path()) {}

  void SetUp() override {
    ASSERT_TRUE(WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir_.Join("sys")));
  }

  // Starts the agent (and, unless told not to, the simulator first).
  void StartAgent(std::vector<std::string> extra = {},
                  const std::string& fixture = FixturePath("8-gpu-nvlink.yaml"),
                  std::map<std::string, std::string> env = {}, bool start_sim = true) {
    if (start_sim) {
      ASSERT_TRUE(sim_.Start());
    }
    std::vector<std::string> args = {BinaryPath(),
                                     "run",
                                     "--kubelet-socket",
                                     sim_.socket(),
                                     "--sysfs-root",
                                     dir_.Join("sys"),
                                     "--health-recovery-period",
                                     "300ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto full_env = FakeNvmlEnv(fixture);
    full_env["FAKE_NVML_CONTROL"] = Ctl();
    for (auto& [k, v] : env) full_env[k] = v;
    agent_ = std::make_unique<Subprocess>(args, full_env);
  }

  std::string Ctl() const { return dir_.Join("nvml.ctl"); }
  void Nvml(const std::string& cmd) {
    ASSERT_TRUE(WaitFor([&] { return Exists(Ctl()); }));
    ASSERT_TRUE(WriteFifo(Ctl(), cmd)) << cmd;
  }

  bool Registered(int count = 1) { return sim_.WaitForRegistrations(count); }

  std::string Dump() { return agent_ ? agent_->Stderr() : ""; }

  TempDir dir_;
  KubeletSimulator sim_;
  std::unique_ptr<Subprocess> agent_;
};

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_INTEGRATION_PLUGIN_MODE_FIXTURE_H_
