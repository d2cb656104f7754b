// Which GPUs the other side of a handover holds, from PodResources records:
// device-plugin IDs (UUIDs, MIG UUIDs, replicas) and DRA claim devices,
// each mapped to its physical GPU.
#include "agent/run/gpus_held.h"

#include <gtest/gtest.h>

#include "agent/plan/device_model.h"
#include "agent/run/held_watch.h"
#include "support/gpu_records.h"

namespace gpu_agent {
namespace {

using gpu_agent::testing::MixedNode;

class GpusHeldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    inv_ = MixedNode();  // GPU 0 in MIG mode (MIG-a, -b, -c), GPU 1 whole
    config_.flags.mig_strategy = "mixed";
    model_ = BuildDeviceModel(config_, inv_, GpuChoice{{0, 1}, {}});
  }
  Config config_;
  nvml::Inventory inv_;
  DeviceModel model_;
};

TEST_F(GpusHeldTest, APluginIdNamesItsGpuWhateverTheResourceName) {
  podresources::PodResources pods;
  pods.devices = {
      {"ml/a", "main", "nvidia.com/gpu", "GPU-1aaa"},
      {"ml/b", "main", "nvidia.com/mig-1g.10gb", "MIG-b"},
      {"ml/c", "main", "example.com/renamed", "GPU-1aaa::3"},  // a time-slice replica
      {"ml/d", "main", "example.com/nic", "mlx5_0"},           // not a GPU of this node
  };
  const GpusHeld held = HeldByDevicePlugin(model_, inv_, pods);
  EXPECT_EQ(held, (GpusHeld{{"GPU-0aaa", {"ml/b"}}, {"GPU-1aaa", {"ml/a", "ml/c"}}}));
  EXPECT_EQ(DescribeHolders(HoldersOf(held, "pod", "pods")),
            "GPU-0aaa (pod ml/b); GPU-1aaa (pods ml/a, ml/c)");
}

TEST_F(GpusHeldTest, IndexIdsCountOnlyUnderAGpuResourceName) {
  podresources::PodResources pods;
  pods.devices = {
      {"ml/a", "main", "nvidia.com/gpu", "1"},
      {"ml/b", "main", "nvidia.com/mig-1g.10gb", "0:2::1"},  // a replica of MIG device 0:2
      {"ml/c", "main", "example.com/nic", "1"},              // another plugin's device "1"
  };
  EXPECT_EQ(HeldByDevicePlugin(model_, inv_, pods),
            (GpusHeld{{"GPU-0aaa", {"ml/b"}}, {"GPU-1aaa", {"ml/a"}}}));
}

TEST_F(GpusHeldTest, AMigDeviceTheModelDoesNotCutStillHoldsItsGpu) {
  // Under migStrategy none the model has GPU 0 whole; a plugin that served
  // its MIG device still holds it.
  Config none;
  const DeviceModel whole = BuildDeviceModel(none, inv_, GpuChoice{{0, 1}, {}});
  podresources::PodResources pods;
  pods.devices = {{"ml/b", "main", "nvidia.com/mig-1g.10gb", "MIG-c"}};
  EXPECT_EQ(HeldByDevicePlugin(whole, inv_, pods), (GpusHeld{{"GPU-0aaa", {"ml/b"}}}));
}

TEST_F(GpusHeldTest, NothingHeldIsEmpty) {
  EXPECT_TRUE(HeldByDevicePlugin(model_, inv_, {}).empty());
  EXPECT_EQ(DescribeHolders(HoldersOf({}, "pod", "pods")), "");
}

TEST_F(GpusHeldTest, DraClaimDevicesOfThisDriverHoldTheirGpu) {
  ASSERT_GE(model_.units.size(), 4u);
  const std::string mig_b = model_.units[1].name;  // GPU 0's second MIG device
  const std::string gpu_1 = model_.units[3].name;  // GPU 1
  podresources::PodResources pods;
  pods.claim_devices = {
      {"ml/a", "main", "ml/a-gpu", "gpu.gpu-agent.github.io", "node", mig_b, ""},
      {"ml/b", "main", "ml/b-gpu", "gpu.gpu-agent.github.io", "node", gpu_1, "s1"},
      {"ml/c", "main", "ml/c-nic", "nic.example.com", "node", gpu_1, ""},  // another driver
      {"ml/d", "main", "ml/d-gpu", "gpu.gpu-agent.github.io", "node", "gone", ""},
  };
  EXPECT_EQ(HeldThroughDra(model_, inv_, pods, "gpu.gpu-agent.github.io"),
            (GpusHeld{{"GPU-0aaa", {"ml/a"}}, {"GPU-1aaa", {"ml/b"}}}));
}

}  // namespace
}  // namespace gpu_agent
