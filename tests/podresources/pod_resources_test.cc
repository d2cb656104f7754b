// The PodResources client against the kubelet stand-in's PodResources
// service over a real unix socket: what pods hold, read into records, and
// every way a kubelet can fail to say it (no socket, no answer, an error,
// bytes that are no answer, an answer too large, an answer that breaks the
// checks), each an error naming the socket and what was wrong.
#include "podresources/pod_resources.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "pod_resources_stand_in.h"
#include "podresources/api.pb.h"
#include "support/test_support.h"

namespace gpu_agent::podresources {
namespace {

using ::gpu_agent::testing::PodResourcesStandIn;
using ::gpu_agent::testing::TempDir;
using namespace std::chrono_literals;

class PodResourcesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(kubelet_.Start()); }

  TempDir dir_;
  PodResourcesStandIn kubelet_{dir_.Join("kubelet.sock")};
};

TEST_F(PodResourcesTest, ListsWhatEveryContainerHolds) {
  kubelet_.Hold("ml", "train", "main", "nvidia.com/gpu", {"GPU-a", "GPU-b::1"});
  kubelet_.Hold("ml", "train", "side", "nvidia.com/mig-1g.10gb", {"MIG-c"});
  kubelet_.HoldClaimDevice("ml", "serve", "main", "ml", "serve-gpu", "gpu.gpu-agent.github.io",
                           "node-a", "gpu-0-abc", "share-1");
  kubelet_.Hold("ml", "idle", "main", "example.com/other", {});
  absl::StatusOr<PodResources> got = List(kubelet_.socket(), 5s);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->pods, 3u);
  EXPECT_EQ(got->devices, (std::vector<HeldDevice>{
                              {"ml/train", "main", "nvidia.com/gpu", "GPU-a"},
                              {"ml/train", "main", "nvidia.com/gpu", "GPU-b::1"},
                              {"ml/train", "side", "nvidia.com/mig-1g.10gb", "MIG-c"},
                          }));
  EXPECT_EQ(got->claim_devices, (std::vector<HeldClaimDevice>{{"ml/serve", "main", "ml/serve-gpu",
                                                               "gpu.gpu-agent.github.io", "node-a",
                                                               "gpu-0-abc", "share-1"}}));
}

TEST_F(PodResourcesTest, APodThatEndedIsListedNoMore) {
  kubelet_.Hold("ml", "train", "main", "nvidia.com/gpu", {"GPU-a"});
  ASSERT_EQ(List(kubelet_.socket(), 5s)->devices.size(), 1u);
  kubelet_.EndPod("ml", "train");
  absl::StatusOr<PodResources> got = List(kubelet_.socket(), 5s);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->devices.empty());
  EXPECT_EQ(got->pods, 0u);
}

TEST_F(PodResourcesTest, NoSocketIsUnavailableAndNamesIt) {
  const std::string gone = dir_.Join("nothing.sock");
  absl::StatusOr<PodResources> got = List(gone, 2s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_NE(got.status().message().find(gone), std::string::npos) << got.status();
}

TEST_F(PodResourcesTest, AKubeletThatDoesNotAnswerRunsOutTheDeadline) {
  kubelet_.SetAnswer(PodResourcesStandIn::Answer::kHold);
  absl::StatusOr<PodResources> got = List(kubelet_.socket(), 200ms);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_NE(got.status().message().find("did not answer within 200 ms"), std::string::npos)
      << got.status();
  kubelet_.Release();
}

TEST_F(PodResourcesTest, AnErrorAnswerIsPassedOnWithItsMessage) {
  kubelet_.FailWith(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "not for you"));
  absl::StatusOr<PodResources> got = List(kubelet_.socket(), 5s);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("not for you"), std::string::npos) << got.status();
  EXPECT_NE(got.status().message().find(kubelet_.socket()), std::string::npos) << got.status();
}

TEST_F(PodResourcesTest, BytesThatAreNoAnswerAreAnError) {
  kubelet_.SetAnswer(PodResourcesStandIn::Answer::kGarbage);
  absl::StatusOr<PodResources> got = List(kubelet_.socket(), 5s);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(kubelet_.socket()), std::string::npos) << got.status();
  EXPECT_EQ(kubelet_.list_calls(), 1);
  // The kubelet mends: the next read is good.
  kubelet_.SetAnswer(PodResourcesStandIn::Answer::kTable);
  EXPECT_TRUE(List(kubelet_.socket(), 5s).ok());
}

TEST_F(PodResourcesTest, AnAnswerOverSixteenMiBIsRefusedNotRead) {
  // 20 MiB of device IDs.
  std::vector<std::string> ids(200 * 1024, std::string(100, 'x'));
  kubelet_.Hold("ml", "huge", "main", "nvidia.com/gpu", ids);
  absl::StatusOr<PodResources> got = List(kubelet_.socket(), 10s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
}

// Each answer that breaks the checks, with what its message must name.
TEST(PodResourcesCheckTest, EveryBrokenAnswerNamesWhereItBreaks) {
  struct Case {
    const char* what;
    std::function<void(v1::ListPodResourcesResponse*)> build;
    std::vector<std::string> named;
  };
  auto container = [](v1::ListPodResourcesResponse* r) {
    v1::PodResources* p = r->add_pod_resources();
    p->set_namespace_("ml");
    p->set_name("train");
    v1::ContainerResources* c = p->add_containers();
    c->set_name("main");
    return c;
  };
  const std::vector<Case> cases = {
      {"a pod without a name",
       [](v1::ListPodResourcesResponse* r) { r->add_pod_resources()->set_namespace_("ml"); },
       {"a pod without a name", "ml"}},
      {"no resource name",
       [&](v1::ListPodResourcesResponse* r) { container(r)->add_devices()->add_device_ids("x"); },
       {"pod ml/train", "\"main\"", "without a resource name"}},
      {"an empty ID",
       [&](v1::ListPodResourcesResponse* r) {
         v1::ContainerDevices* d = container(r)->add_devices();
         d->set_resource_name("nvidia.com/gpu");
         d->add_device_ids("");
       },
       {"pod ml/train", "empty device ID of nvidia.com/gpu"}},
      {"a claim without a name",
       [&](v1::ListPodResourcesResponse* r) { container(r)->add_dynamic_resources(); },
       {"pod ml/train", "claim without a name"}},
      {"a claim device without a driver",
       [&](v1::ListPodResourcesResponse* r) {
         v1::DynamicResource* d = container(r)->add_dynamic_resources();
         d->set_claim_namespace("ml");
         d->set_claim_name("c");
         d->add_claim_resources()->set_device_name("gpu-0");
       },
       {"pod ml/train", "claim ml/c", "without driver or device name"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::ListPodResourcesResponse r;
    c.build(&r);
    absl::StatusOr<PodResources> got = FromListResponse(r);
    ASSERT_FALSE(got.ok());
    for (const std::string& n : c.named) {
      EXPECT_NE(got.status().message().find(n), std::string::npos) << got.status();
    }
  }
}

TEST(PodResourcesCheckTest, TheDefaultSocketIsUnderTheKubeletRoot) {
  EXPECT_EQ(DefaultSocket("/var/lib/kubelet"), "/var/lib/kubelet/pod-resources/kubelet.sock");
}

}  // namespace
}  // namespace gpu_agent::podresources
