// One config per node, chosen by a node label, end to end: the real binary
// against the API server stand-in (the label) with the NVML stand-in, in
// static mode (the Node's capacity shows the config in use) and plugin mode
// (the kubelet simulator's devices do).
#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <cstring>

#include "api_server_stub.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"
#include "support/rbac_rules.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kGpu = "nvidia.com/gpu";
constexpr const char* kLabel = "nvidia.com/device-plugin.config";
constexpr const char* kNode = "gpu-node-1";

std::string Sliced(int replicas) {
  return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
         "      replicas: " +
         std::to_string(replicas) + "\n";
}

int PortFromLog(Subprocess& p) {
  constexpr const char* kText = "metrics endpoint listening address=127.0.0.1:";
  int port = -1;
  WaitFor([&] {
    const std::string err = p.Stderr();
    const size_t at = err.find(kText);
    if (at == std::string::npos) return false;
    port = std::stoi(err.substr(at + std::strlen(kText)));
    return true;
  });
  return port;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class PerNodeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    configs_ = dir_.Join("configs");
    dir_.Write("configs/whole", "version: v1\n");
    dir_.Write("configs/two", Sliced(2));
    dir_.Write("configs/three.yaml", Sliced(3));
    api_.AddNode(kNode);
  }
  // Static mode on the 8-GPU fixture, default config "whole".
  void StartStatic(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {BinaryPath(),
                                     "run",
                                     "--mode",
                                     "static",
                                     "--node-name",
                                     kNode,
                                     "--proxy=" + api_.url(),
                                     "--node-config-dir",
                                     configs_,
                                     "--node-config-default",
                                     "whole",
                                     "--metrics-address",
                                     "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto env = FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml"));
    agent_ = std::make_unique<Subprocess>(args, env);
  }
  bool CapacityIs(const std::string& v) {
    return WaitFor([&] { return api_.Capacity(kNode, kGpu) == v; });
  }
  std::string Metrics() {
    if (port_ < 0) port_ = PortFromLog(*agent_);
    httplib::Client http("127.0.0.1", port_);
    auto r = http.Get("/metrics");
    return r ? r->body : "";
  }
  std::string Log() { return agent_ ? agent_->Stderr() : ""; }

  TempDir dir_;
  std::string configs_;
  ApiServerStub api_;  // outlives the agent: it goes first
  std::unique_ptr<Subprocess> agent_;
  int port_ = -1;
};

TEST_F(PerNodeConfigTest, StaticModeReloadsWhenTheLabelChangesAndFallsBackToTheDefault) {
  api_.SetLabel(kNode, kLabel, "two");
  StartStatic();
  ASSERT_TRUE(CapacityIs("16")) << Log();
  const int watches = api_.watch_count();
  api_.SetLabel(kNode, kLabel, "three");  // found as three.yaml
  ASSERT_TRUE(CapacityIs("24")) << Log();
  EXPECT_NE(Log().find("the node's config label changed; reloading as on SIGHUP"),
            std::string::npos);
  EXPECT_NE(Metrics().find("gpu_agent_node_config_info{name=\"three\",source=\"label\"} 1"),
            std::string::npos)
      << Metrics();
  api_.SetLabel(kNode, kLabel, std::nullopt);
  ASSERT_TRUE(CapacityIs("8")) << Log();
  EXPECT_NE(Metrics().find("gpu_agent_node_config_info{name=\"whole\",source=\"default\"} 1"),
            std::string::npos)
      << Metrics();
  // One watch of the Node at a time: the label comes from the capacity watch.
  EXPECT_TRUE(WaitFor([&] { return api_.open_watches() == 1; })) << api_.open_watches();
  EXPECT_GT(api_.watch_count(), watches) << "each reload watches afresh";
}

TEST_F(PerNodeConfigTest, UnknownOrBrokenNamedConfigKeepsTheRunningOneAndSaysWhy) {
  dir_.Write("configs/broken", "version: v1\nsharing:\n  timeSlicing: [oops\n");
  api_.SetLabel(kNode, kLabel, "two");
  StartStatic();
  ASSERT_TRUE(CapacityIs("16")) << Log();
  constexpr const char* kKept =
      "the node's named config cannot be used; keeping the running config";
  api_.SetLabel(kNode, kLabel, "h100");
  ASSERT_TRUE(agent_->WaitForStderr(kKept)) << Log();
  EXPECT_NE(Log().find("no config named"), std::string::npos) << Log();
  EXPECT_NE(Log().find(configs_), std::string::npos) << "the folder is named\n" << Log();
  EXPECT_NE(Log().find("h100"), std::string::npos) << Log();
  ASSERT_TRUE(WaitFor([&] {
    return Metrics().find("gpu_agent_node_config_errors_total 1") != std::string::npos;
  })) << Metrics();
  EXPECT_EQ(api_.Capacity(kNode, kGpu), "16");
  api_.SetLabel(kNode, kLabel, "broken");
  ASSERT_TRUE(WaitFor([&] { return Count(Log(), kKept) == 2; })) << Log();
  EXPECT_NE(Log().find("configs/broken:"), std::string::npos) << "file:line:column\n" << Log();
  EXPECT_NE(Metrics().find("gpu_agent_node_config_errors_total 2"), std::string::npos);
  EXPECT_NE(Metrics().find("gpu_agent_node_config_info{name=\"two\",source=\"label\"} 1"),
            std::string::npos)
      << Metrics();
  EXPECT_EQ(api_.Capacity(kNode, kGpu), "16");
  EXPECT_TRUE(agent_->Running());
  // A good name again is used.
  api_.SetLabel(kNode, kLabel, "three");
  ASSERT_TRUE(CapacityIs("24")) << Log();
}

TEST_F(PerNodeConfigTest, PluginModeWatchesItsNodeAndReregistersWithTheNamedConfig) {
  KubeletSimulator sim(dir_.path());
  ASSERT_TRUE(sim.Start());
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir_.Join("sys")));
  api_.SetLabel(kNode, kLabel, "two");
  auto env = FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml"));
  env["NODE_NAME"] = kNode;
  env["CONFIG_FILE_SRCDIR"] = configs_;  // NVIDIA's config-manager names
  env["DEFAULT_CONFIG"] = "whole";
  agent_ = std::make_unique<Subprocess>(
      std::vector<std::string>{BinaryPath(), "run", "--kubelet-socket", sim.socket(),
                               "--sysfs-root", dir_.Join("sys"), "--proxy=" + api_.url()},
      env);
  auto devices = [&](size_t n) {
    return sim.WaitForDevices(kGpu, [n](const auto& d) { return d.size() == n; });
  };
  ASSERT_TRUE(devices(16)) << Log();
  api_.SetLabel(kNode, kLabel, "three");
  ASSERT_TRUE(devices(24)) << Log();
  api_.SetLabel(kNode, kLabel, std::nullopt);
  ASSERT_TRUE(devices(8)) << Log();
  // What plugin mode asks of the API server is what the component's
  // ClusterRole grants, and nothing more.
  EXPECT_EQ(api_.calls(), GrantedCalls("manifests/components/node-config/rbac.yaml"));
}

TEST_F(PerNodeConfigTest, BadSettingsAreNamed) {
  auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  struct Case {
    std::vector<std::string> args;
    std::string error;
  } cases[] = {
      {{"--node-config-dir", dir_.Join("nope")}, "flag --node-config-dir: nodeConfig.dir: \""},
      {{"--node-config-dir", configs_, "--node-config-default", "h100"},
       "flag --node-config-default: nodeConfig.default: no config named \"h100\""},
      {{"--node-config-dir", configs_, "--node-config-default", "../whole"},
       "nodeConfig.default: \"../whole\" is not a config name"},
      {{"--node-config-dir", configs_, "--node-config-label", "bad key"},
       "nodeConfig.label: \"bad key\" is not a label key"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"run", "--node-name", kNode, "--proxy=" + api_.url()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult r = RunAgent(args, env);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << c.error << "\n" << r.err;
  }
  RunResult no_node = RunAgent({"run", "--node-config-dir", configs_}, env);
  EXPECT_EQ(no_node.code, 2);
  EXPECT_NE(no_node.err.find("nodeConfig.dir: a config chosen by a node label needs this node's"),
            std::string::npos)
      << no_node.err;
}

}  // namespace
}  // namespace gpu_agent::testing
