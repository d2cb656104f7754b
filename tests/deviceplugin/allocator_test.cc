#include "deviceplugin/allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "allocate_text.h"
#include "support/test_support.h"

namespace gpu_agent::deviceplugin {
namespace {

using gpu_agent::testing::AllocateText;
using gpu_agent::testing::TempDir;

ResourceSpec TwoGpus(bool replicated = false) {
  ResourceSpec spec;
  spec.resource_name = "nvidia.com/gpu";
  spec.endpoint = "nvidia-gpu.sock";
  spec.replicated = replicated;
  for (int g = 0; g < 2; ++g) {
    const std::string uuid = "GPU-" + std::to_string(g);
    for (int r = 0; r < (replicated ? 3 : 1); ++r) {
      PluginDevice d;
      d.id = replicated ? uuid + "::" + std::to_string(r) : uuid;
      d.gpu_id = uuid;
      d.key.uuid = uuid;
      d.physical = g;
      d.device_nodes = {"/dev/nvidia" + std::to_string(g)};
      spec.devices.push_back(d);
    }
  }
  spec.link_score = {{0, 10}, {10, 0}};
  return spec;
}

v1beta1::ContainerAllocateRequest Req(std::vector<std::string> ids) {
  v1beta1::ContainerAllocateRequest r;
  for (auto& id : ids) r.add_devices_ids(id);
  return r;
}

// CDI annotation keys end in a per-response id ("_" and 16 hex digits),
// checked on its own below: "_ID" here.
std::string WithoutResponseIds(const std::string& text) {
  static const std::regex id("(gpu-agent_[A-Za-z0-9.-]+)_[0-9a-f]{16}\"");
  return std::regex_replace(text, id, "$1_ID\"");
}

struct StrategyCase {
  const char* name;
  std::vector<std::string> strategies;
  // Expected response, as protobuf text.
  std::string expected;
};

void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.name; }

class AllocatorStrategyTest : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(AllocatorStrategyTest, ExactResponse) {
  const StrategyCase& c = GetParam();
  AllocateOptions opts;
  opts.device_list = *DeviceListStrategies::Parse(c.strategies);
  Allocator alloc(opts);
  DevicePublisher pub(TwoGpus());
  v1beta1::ContainerAllocateResponse out;
  ASSERT_TRUE(alloc.AllocateContainer(*pub.Current(), Req({"GPU-1", "GPU-0"}), &out).ok());
  EXPECT_EQ(WithoutResponseIds(AllocateText(out)), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    All, AllocatorStrategyTest,
    ::testing::Values(
        StrategyCase{
            "Envvar", {"envvar"}, R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "GPU-1,GPU-0" })"},
        StrategyCase{
            "VolumeMounts",
            {"volume-mounts"},
            R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "/var/run/nvidia-container-devices" } )"
            R"(mounts { container_path: "/var/run/nvidia-container-devices/GPU-1" host_path: "/dev/null" } )"
            R"(mounts { container_path: "/var/run/nvidia-container-devices/GPU-0" host_path: "/dev/null" })"},
        StrategyCase{
            "CdiAnnotations",
            {"cdi-annotations"},
            R"(annotations { key: "cdi.k8s.io/gpu-agent_gpu_ID" value: "gpu-agent.github.io/gpu=GPU-1,gpu-agent.github.io/gpu=GPU-0" })"},
        StrategyCase{
            "CdiCri",
            {"cdi-cri"},
            R"(cdi_devices { name: "gpu-agent.github.io/gpu=GPU-1" } cdi_devices { name: "gpu-agent.github.io/gpu=GPU-0" })"},
        StrategyCase{
            "EnvvarAndCdiCri",
            {"envvar", "cdi-cri"},
            R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "GPU-1,GPU-0" } )"
            R"(cdi_devices { name: "gpu-agent.github.io/gpu=GPU-1" } cdi_devices { name: "gpu-agent.github.io/gpu=GPU-0" })"}),
    [](const ::testing::TestParamInfo<StrategyCase>& p) { return p.param.name; });

TEST(AllocatorTest, PassDeviceSpecsOnlyForNodesPresent) {
  TempDir root;
  root.Write("dev/nvidiactl", "");
  root.Write("dev/nvidia-uvm", "");
  AllocateOptions opts;
  opts.pass_device_specs = true;
  opts.dev_root = root.path() + "/";
  Allocator alloc(opts);
  DevicePublisher pub(TwoGpus());
  v1beta1::ContainerAllocateResponse out;
  ASSERT_TRUE(alloc.AllocateContainer(*pub.Current(), Req({"GPU-1"}), &out).ok());
  ASSERT_EQ(out.devices_size(), 3);
  EXPECT_EQ(out.devices(0).container_path(), "/dev/nvidiactl");
  EXPECT_EQ(out.devices(0).host_path(), root.path() + "/dev/nvidiactl");
  EXPECT_EQ(out.devices(0).permissions(), "rw");
  EXPECT_EQ(out.devices(1).container_path(), "/dev/nvidia-uvm");
  EXPECT_EQ(out.devices(2).container_path(), "/dev/nvidia1");
}

// In a container that mounts the host's root at /driver-root: nodes are
// looked for there, and the runtime is given the host's paths.
TEST(AllocatorTest, HostPathsAreTheHostsWhereverTheNodesAreSeen) {
  TempDir here;  // the host's root as the agent's container sees it
  here.Write("dev/nvidiactl", "");
  AllocateOptions opts;
  opts.pass_device_specs = true;
  opts.dev_root = "/";
  opts.dev_root_here = here.path();
  Allocator alloc(opts);
  DevicePublisher pub(TwoGpus());
  v1beta1::ContainerAllocateResponse out;
  ASSERT_TRUE(alloc.AllocateContainer(*pub.Current(), Req({"GPU-0"}), &out).ok());
  ASSERT_EQ(out.devices_size(), 2);  // nvidia-uvm is not there: not passed
  EXPECT_EQ(out.devices(0).host_path(), "/dev/nvidiactl");
  EXPECT_EQ(out.devices(0).container_path(), "/dev/nvidiactl");
  EXPECT_EQ(out.devices(1).host_path(), "/dev/nvidia0");
}

TEST(AllocatorTest, ReplicasOfOneGpuAreOneDeviceToTheRuntime) {
  Allocator alloc(AllocateOptions{});
  DevicePublisher pub(TwoGpus(true));
  v1beta1::ContainerAllocateResponse out;
  ASSERT_TRUE(
      alloc.AllocateContainer(*pub.Current(), Req({"GPU-0::0", "GPU-0::2", "GPU-1::1"}), &out)
          .ok());
  EXPECT_EQ(out.envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-0,GPU-1");
}

TEST(AllocatorTest, BadRequestsNameTheIds) {
  Allocator alloc(AllocateOptions{});
  DevicePublisher pub(TwoGpus());
  ASSERT_TRUE(pub.SetHealth({"GPU-1"}, false));
  struct Case {
    std::vector<std::string> ids;
    std::string expect;
  } cases[] = {
      {{}, "names no device IDs"},
      {{"GPU-9"}, "unknown device IDs \"GPU-9\""},
      {{"GPU-1"}, "unhealthy device IDs \"GPU-1\""},
      {{"GPU-0", "GPU-0"}, "duplicate device IDs \"GPU-0\""},
      {{"GPU-0", "x", "GPU-1"}, "unknown device IDs \"x\"; unhealthy device IDs \"GPU-1\""},
  };
  for (const Case& c : cases) {
    v1beta1::ContainerAllocateResponse out;
    absl::Status s = alloc.AllocateContainer(*pub.Current(), Req(c.ids), &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(s.message()).find(c.expect), std::string::npos) << s.message();
  }
}

TEST(AllocatorTest, TenThousandUnknownIdsGiveAShortMessage) {
  Allocator alloc(AllocateOptions{});
  DevicePublisher pub(TwoGpus());
  std::vector<std::string> ids;
  for (int i = 0; i < 10000; ++i) ids.push_back("id-" + std::to_string(i));
  v1beta1::ContainerAllocateResponse out;
  absl::Status s = alloc.AllocateContainer(*pub.Current(), Req(ids), &out);
  EXPECT_NE(std::string(s.message()).find("and 9990 more"), std::string::npos);
  EXPECT_LT(s.message().size(), 400u);
}

TEST(AllocatorTest, FailRequestsGreaterThanOne) {
  AllocateOptions opts;
  opts.fail_requests_greater_than_one = true;
  Allocator alloc(opts);
  DevicePublisher pub(TwoGpus(true));
  v1beta1::ContainerAllocateResponse out;
  EXPECT_TRUE(alloc.AllocateContainer(*pub.Current(), Req({"GPU-0::1"}), &out).ok());
  absl::Status s = alloc.AllocateContainer(*pub.Current(), Req({"GPU-0::1", "GPU-1::1"}), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("failRequestsGreaterThanOne"), std::string::npos);
  EXPECT_NE(std::string(s.message()).find("\"GPU-0::1\", \"GPU-1::1\""), std::string::npos);
}

TEST(DevicePublisherTest, HealthChangesAllReplicasAndBumpsVersion) {
  DevicePublisher pub(TwoGpus(true));
  const uint64_t v = pub.Current()->version;
  EXPECT_FALSE(pub.SetHealth({"GPU-0"}, true));  // no change, no new version
  EXPECT_EQ(pub.Current()->version, v);
  EXPECT_TRUE(pub.SetHealth({"GPU-0"}, false));
  auto snap = pub.Current();
  EXPECT_EQ(snap->version, v + 1);
  EXPECT_EQ(snap->HealthyCount(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(snap->Find("GPU-0::" + std::to_string(r))->healthy);
}

}  // namespace
// A container asking for two resources gets one response per resource; the
// kubelet merges their annotations and keeps the first of two equal keys. So
// every response's CDI annotation key is its own, and the merge loses
// nothing.
TEST(AllocatorTest, CdiAnnotationKeyIsUniquePerResponse) {
  AllocateOptions opts;
  opts.device_list = *DeviceListStrategies::Parse({"cdi-annotations"});
  Allocator alloc(opts);
  ResourceSpec whole = TwoGpus();
  ResourceSpec shared = TwoGpus(/*replicated=*/true);
  shared.resource_name = "nvidia.com/gpu.shared";
  DevicePublisher a(whole), b(shared);
  v1beta1::ContainerAllocateResponse ra, rb, ra_again;
  ASSERT_TRUE(alloc.AllocateContainer(*a.Current(), Req({"GPU-0"}), &ra).ok());
  ASSERT_TRUE(alloc.AllocateContainer(*b.Current(), Req({"GPU-1::0"}), &rb).ok());
  ASSERT_TRUE(alloc.AllocateContainer(*a.Current(), Req({"GPU-0"}), &ra_again).ok());
  ASSERT_EQ(ra.annotations_size(), 1);
  ASSERT_EQ(rb.annotations_size(), 1);
  const std::string ka = ra.annotations().begin()->first;
  const std::string kb = rb.annotations().begin()->first;
  EXPECT_TRUE(std::regex_match(ka, std::regex("cdi\\.k8s\\.io/gpu-agent_gpu_[0-9a-f]{16}"))) << ka;
  EXPECT_NE(ka, kb);
  EXPECT_EQ(ka, ra_again.annotations().begin()->first) << "the same request, the same key";
  // The kubelet's merge, first key wins.
  std::map<std::string, std::string> merged;
  for (const auto* r : {&ra, &rb}) {
    for (const auto& [k, v] : r->annotations()) merged.emplace(k, v);
  }
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[ka], "gpu-agent.github.io/gpu=GPU-0");
  EXPECT_EQ(merged[kb], "gpu-agent.github.io/gpu=GPU-1");
  // A long CDI kind is cut so the key's name stays within 63 characters.
  opts.cdi_kind = "example.com/" + std::string(80, 'x');
  Allocator long_kind(opts);
  v1beta1::ContainerAllocateResponse rl;
  ASSERT_TRUE(long_kind.AllocateContainer(*a.Current(), Req({"GPU-0"}), &rl).ok());
  const std::string kl = rl.annotations().begin()->first;
  EXPECT_EQ(kl.size() - std::string("cdi.k8s.io/").size(), 63u) << kl;
}

}  // namespace gpu_agent::deviceplugin
