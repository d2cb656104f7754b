// Plugin mode, Allocate and GetPreferredAllocation: the exact answer per
// device-list strategy, refused requests, concurrent clients, NVLink
// preference, host paths under a container driver root, selected GPUs.
// The fixture: plugin_mode_fixture.h.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <ostream>
#include <regex>
#include <set>
#include <thread>

#include "allocate_text.h"
#include "base/strings.h"
#include "integration/plugin_mode_fixture.h"

namespace gpu_agent::testing {
namespace {

struct AllocCase {
  const char* name;
  std::vector<std::string> flags;
  std::string expected;  // text format of the container response
};

void PrintTo(const AllocCase& c, std::ostream* os) { *os << c.name; }

class AllocateStrategyTest : public PluginModeTest,
                             public ::testing::WithParamInterface<AllocCase> {};

TEST_P(AllocateStrategyTest, ExactResponse) {
  dir_.Write("devroot/dev/nvidiactl", "");
  dir_.Write("devroot/dev/nvidia-uvm", "");
  // Every GPU's node: the CDI spec (written with a cdi-* strategy) names
  // them all; Allocate's device specs only those asked for.
  for (int i = 0; i < 8; ++i) dir_.Write(StrCat("devroot/dev/nvidia", i), "");
  ASSERT_TRUE(WriteFakeDriverRoot(dir_.Join("driver"), "550.54.15"));
  std::vector<std::string> flags = {
      "--device-id-strategy", "index",          "--dev-root",           dir_.Join("devroot"),
      "--cdi-spec-dir",       dir_.Join("cdi"), "--nvidia-driver-root", dir_.Join("driver")};
  flags.insert(flags.end(), GetParam().flags.begin(), GetParam().flags.end());
  StartAgent(flags);
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  c->add_devices_ids("5");
  c->add_devices_ids("2");
  req.add_container_requests()->add_devices_ids("0");
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kGpu, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 2);
  std::string expected = GetParam().expected;
  size_t pos;
  while ((pos = expected.find("ROOT")) != std::string::npos) {
    expected.replace(pos, 4, dir_.Join("devroot"));
  }
  // CDI annotation keys end in a per-response id: "_ID" in the expectation.
  const std::string got =
      std::regex_replace(AllocateText(resp.container_responses(0)),
                         std::regex("(gpu-agent_gpu)_[0-9a-f]{16}\""), "$1_ID\"");
  EXPECT_EQ(got, expected);
  EXPECT_EQ(resp.container_responses(1).envs().size(), resp.container_responses(0).envs().size());
}

INSTANTIATE_TEST_SUITE_P(
    All, AllocateStrategyTest,
    ::testing::Values(
        AllocCase{"Envvar", {}, R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "5,2" })"},
        AllocCase{
            "VolumeMounts",
            {"--device-list-strategy", "volume-mounts"},
            R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "/var/run/nvidia-container-devices" } )"
            R"(mounts { container_path: "/var/run/nvidia-container-devices/5" host_path: "/dev/null" } )"
            R"(mounts { container_path: "/var/run/nvidia-container-devices/2" host_path: "/dev/null" })"},
        AllocCase{
            "CdiAnnotations",
            {"--device-list-strategy", "cdi-annotations"},
            R"(annotations { key: "cdi.k8s.io/gpu-agent_gpu_ID" value: "gpu-agent.github.io/gpu=5,gpu-agent.github.io/gpu=2" })"},
        AllocCase{
            "CdiCri",
            {"--device-list-strategy", "cdi-cri"},
            R"(cdi_devices { name: "gpu-agent.github.io/gpu=5" } cdi_devices { name: "gpu-agent.github.io/gpu=2" })"},
        AllocCase{
            "EnvvarCdiCriAndDeviceSpecs",
            {"--device-list-strategy", "envvar,cdi-cri", "--pass-device-specs"},
            R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "5,2" } )"
            R"(devices { container_path: "/dev/nvidiactl" host_path: "ROOT/dev/nvidiactl" permissions: "rw" } )"
            R"(devices { container_path: "/dev/nvidia-uvm" host_path: "ROOT/dev/nvidia-uvm" permissions: "rw" } )"
            R"(devices { container_path: "/dev/nvidia5" host_path: "ROOT/dev/nvidia5" permissions: "rw" } )"
            R"(devices { container_path: "/dev/nvidia2" host_path: "ROOT/dev/nvidia2" permissions: "rw" } )"
            R"(cdi_devices { name: "gpu-agent.github.io/gpu=5" } cdi_devices { name: "gpu-agent.github.io/gpu=2" })"}),
    [](const ::testing::TestParamInfo<AllocCase>& p) { return p.param.name; });

TEST_F(PluginModeTest, BadAllocateRequestsAreRefusedWithTheIds) {
  const std::string config = dir_.Write("ts.yaml", R"(version: v1
sharing:
  timeSlicing:
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
)");
  StartAgent({"--config", config, "--device-id-strategy", "index"});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 32; }));
  Nvml("xid 7 79");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 28; }));
  struct Case {
    std::vector<std::string> ids;
    std::string expect;
  } cases[] = {
      {{}, "names no device IDs"},
      {{"99::0"}, "unknown device IDs \"99::0\""},
      {{"7::1"}, "unhealthy device IDs \"7::1\""},
      {{"1::1", "1::1"}, "refused: sharing.timeSlicing.failRequestsGreaterThanOne"},
      {{"0::0", "1::0"}, "refused: sharing.timeSlicing.failRequestsGreaterThanOne"},
  };
  for (const Case& c : cases) {
    v1beta1::AllocateRequest req;
    auto* cr = req.add_container_requests();
    for (const auto& id : c.ids) cr->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::Status s = sim_.Allocate(kGpu, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.expect;
    EXPECT_NE(s.error_message().find(c.expect), std::string::npos) << s.error_message();
  }
  // 10,000 IDs in one request: refused with a short message, daemon fine.
  v1beta1::AllocateRequest big;
  auto* cr = big.add_container_requests();
  for (int i = 0; i < 10000; ++i) cr->add_devices_ids("id-" + std::to_string(i));
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kGpu, big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), 600u);
  v1beta1::AllocateRequest ok;
  ok.add_container_requests()->add_devices_ids("3::2");
  EXPECT_TRUE(sim_.Allocate(kGpu, ok, &resp).ok());
}

TEST_F(PluginModeTest, SixteenClientsAllocateAtOnce) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 16; ++t) {
    clients.emplace_back([&, t] {
      auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
          "unix://" + dir_.Join("nvidia-gpu.sock"), grpc::InsecureChannelCredentials()));
      for (int i = 0; i < 50; ++i) {
        v1beta1::AllocateRequest req;
        req.add_container_requests()->add_devices_ids(uuids[static_cast<size_t>((t + i) % 8)]);
        v1beta1::AllocateResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        grpc::Status s = stub->Allocate(&ctx, req, &resp);
        if (s.ok() && resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES") ==
                          uuids[static_cast<size_t>((t + i) % 8)]) {
          ++ok;
        } else {
          ++bad;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 800);
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(PluginModeTest, PreferredAllocationUsesNvlinkTopology) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& u : uuids) c->add_available_deviceids(u);
  c->add_must_include_deviceids(uuids[4]);
  c->set_allocation_size(2);
  auto* c2 = req.add_container_requests();
  for (const auto& u : uuids) c2->add_available_deviceids(u);
  c2->set_allocation_size(4);
  v1beta1::PreferredAllocationResponse resp;
  grpc::Status s = sim_.GetPreferredAllocation(kGpu, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 2);
  // GPU 4's double NVLinks go to GPUs 0 and 7; 0 comes first.
  EXPECT_EQ(std::vector<std::string>(resp.container_responses(0).deviceids().begin(),
                                     resp.container_responses(0).deviceids().end()),
            (std::vector<std::string>{uuids[4], uuids[0]}));
  EXPECT_EQ(std::set<std::string>(resp.container_responses(1).deviceids().begin(),
                                  resp.container_responses(1).deviceids().end()),
            (std::set<std::string>{uuids[0], uuids[1], uuids[2], uuids[3]}));

  v1beta1::PreferredAllocationRequest too_many;
  auto* t = too_many.add_container_requests();
  t->add_available_deviceids(uuids[0]);
  t->set_allocation_size(2);
  s = sim_.GetPreferredAllocation(kGpu, too_many, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("more than the 1 available"), std::string::npos);
  v1beta1::PreferredAllocationRequest unknown;
  auto* u = unknown.add_container_requests();
  u->add_available_deviceids(uuids[0]);
  u->add_must_include_deviceids("GPU-nope");
  u->set_allocation_size(1);
  s = sim_.GetPreferredAllocation(kGpu, unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("\"GPU-nope\""), std::string::npos) << s.error_message();
}

// As the no-runtime-hook DaemonSet runs it: the host's root mounted at
// CONTAINER_DRIVER_ROOT, NVIDIA_DRIVER_ROOT the host's view. NVML is found
// under the mount; Allocate names the host's paths.
TEST_F(PluginModeTest, ContainerDriverRootFindsNvmlAndAllocateNamesHostPaths) {
  TempDir host;  // the host's "/" as the container sees it
  std::filesystem::create_directories(host.Join("usr/lib64"));
  std::filesystem::create_symlink(FakeNvmlDir() + "/libnvidia-ml.so.1",
                                  host.Join("usr/lib64/libnvidia-ml.so.1"));
  host.Write("dev/nvidiactl", "");
  host.Write("dev/nvidia-uvm", "");
  host.Write("dev/nvidia3", "");
  StartAgent({"--pass-device-specs"}, FixturePath("8-gpu-nvlink.yaml"),
             {{"LD_LIBRARY_PATH", kUnset},
              {"NVIDIA_DRIVER_ROOT", "/"},
              {"CONTAINER_DRIVER_ROOT", host.path()}});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(uuids[3]);
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kGpu, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<std::string> host_paths;
  for (const auto& d : resp.container_responses(0).devices()) host_paths.push_back(d.host_path());
  EXPECT_EQ(host_paths,
            (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia3"}));
}

TEST_F(PluginModeTest, SelectedGpusOnlyAndPackedReplicas) {
  const std::string config = dir_.Write("sel.yaml", R"(version: v1
devices:
  exclude: ["index:0", "index:7"]
sharing:
  timeSlicing:
    allocationPolicy: packed
    resources:
    - name: nvidia.com/gpu
      replicas: 4
)");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 24; })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  for (const auto& d : sim_.Devices(kGpu)) {
    EXPECT_NE(d.id().rfind(uuids[0], 0), 0u) << d.id();
    EXPECT_NE(d.id().rfind(uuids[7], 0), 0u) << d.id();
  }
  // Packed: three replicas come from one GPU, not three.
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& d : sim_.Devices(kGpu)) c->add_available_deviceids(d.id());
  c->set_allocation_size(3);
  v1beta1::PreferredAllocationResponse resp;
  ASSERT_TRUE(sim_.GetPreferredAllocation(kGpu, req, &resp).ok());
  std::set<std::string> gpus;
  for (const auto& id : resp.container_responses(0).deviceids())
    gpus.insert(id.substr(0, id.find("::")));
  EXPECT_EQ(gpus.size(), 1u);
}

}  // namespace
}  // namespace gpu_agent::testing
