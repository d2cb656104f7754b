// The kubelet stand-in's PodResources API in front of the real agent in
// plugin mode: what its device manager handed out (Allocate answered by the
// agent) is what List says pods hold, read with the agent's own client, and
// a pod that ended is listed no more. What a handover between the device
// plugin and DRA reads to know which GPUs are still in use.
// The fixture: plugin_mode_fixture.h.
#include <gtest/gtest.h>

#include "integration/plugin_mode_fixture.h"
#include "podresources/pod_resources.h"

namespace gpu_agent::testing {
namespace {

using namespace std::chrono_literals;

TEST_F(PluginModeTest, PodResourcesListsTheDevicesTheKubeletHandedOut) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  const std::string socket = dir_.Join("pod-resources.sock");
  ASSERT_TRUE(sim_.ServePodResources(socket));
  const Devices devices = sim_.Devices(kGpu);
  const std::string gpu0 = devices[0].id(), gpu1 = devices[1].id();
  v1beta1::AllocateResponse a, b;
  ASSERT_TRUE(sim_.AdmitPod("ml", "a", "main", kGpu, {gpu0}, &a).ok());
  ASSERT_TRUE(sim_.AdmitPod("ml", "b", "main", kGpu, {gpu1}, &b).ok());
  ASSERT_EQ(a.container_responses_size(), 1);

  absl::StatusOr<podresources::PodResources> held = podresources::List(socket, 5s);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->devices, (std::vector<podresources::HeldDevice>{
                               {"ml/a", "main", kGpu, gpu0},
                               {"ml/b", "main", kGpu, gpu1},
                           }));

  sim_.EndPod("ml", "a");
  held = podresources::List(socket, 5s);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->devices, (std::vector<podresources::HeldDevice>{{"ml/b", "main", kGpu, gpu1}}));
  EXPECT_EQ(held->pods, 1u);
}

}  // namespace
}  // namespace gpu_agent::testing
