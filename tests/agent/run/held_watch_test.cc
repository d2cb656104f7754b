// The watch of the GPUs device-plugin pods hold, against the PodResources
// stand-in on a real unix socket: what it reports as pods come and go, and
// what it does when the kubelet answers an error, garbage or nothing.
#include "agent/run/held_watch.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "agent/plan/device_model.h"
#include "pod_resources_stand_in.h"
#include "support/gpu_records.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using namespace std::chrono_literals;
using testing::PodResourcesStandIn;
using testing::WaitFor;

class HeldWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    inv_ = testing::MixedNode();  // GPU 0 in MIG mode (MIG-a, -b, -c), GPU 1 whole
    config_.flags.mig_strategy = "mixed";
    model_ = BuildDeviceModel(config_, inv_, GpuChoice{{0, 1}, {}});
    ASSERT_TRUE(stand_in_.Start());
  }

  std::unique_ptr<HeldWatch> Start(bool strict) {
    HeldWatchOptions o;
    o.socket = stand_in_.socket();
    o.interval = 20ms;
    o.deadline = 500ms;
    o.strict = strict;
    return HeldWatch::Start(o, model_, inv_, [this](const HeldState& s) {
      std::lock_guard<std::mutex> lock(mu_);
      reports_.push_back(s);
    });
  }

  std::vector<HeldState> Reports() {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_;
  }
  HeldState Last() {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_.empty() ? HeldState{} : reports_.back();
  }

  Config config_;
  nvml::Inventory inv_;
  DeviceModel model_;
  testing::TempDir dir_;
  PodResourcesStandIn stand_in_{dir_.Join("pod-resources.sock")};
  std::mutex mu_;
  std::vector<HeldState> reports_;  // protected by mu_
};

TEST_F(HeldWatchTest, HeldGpusAreReportedBeforeStartReturnsAndFreedAsTheirPodsEnd) {
  stand_in_.Hold("ml", "a", "main", "nvidia.com/gpu", {"GPU-1aaa"});
  stand_in_.Hold("ml", "b", "main", "nvidia.com/mig-1g.10gb", {"MIG-b"});
  std::unique_ptr<HeldWatch> w = Start(/*strict=*/true);
  // The first answer is in before Start returns.
  ASSERT_EQ(Reports().size(), 1u);
  EXPECT_EQ(Reports()[0].holders,
            (std::map<std::string, std::string>{{"GPU-0aaa", "device-plugin pod ml/b"},
                                                {"GPU-1aaa", "device-plugin pod ml/a"}}));
  EXPECT_FALSE(Reports()[0].done);
  stand_in_.EndPod("ml", "a");
  ASSERT_TRUE(WaitFor([&] { return Last().holders.size() == 1; }));
  EXPECT_EQ(Last().holders.count("GPU-0aaa"), 1u);
  stand_in_.EndPod("ml", "b");
  ASSERT_TRUE(WaitFor([&] { return Last().done; }));
  EXPECT_TRUE(Last().holders.empty());
  EXPECT_TRUE(w->state().done);
  // Done: the watch has ended; nothing more is asked.
  const int calls = stand_in_.list_calls();
  w->Stop();
  EXPECT_EQ(stand_in_.list_calls(), calls);
}

TEST_F(HeldWatchTest, NothingHeldEndsAtOnce) {
  std::unique_ptr<HeldWatch> w = Start(/*strict=*/true);
  ASSERT_EQ(Reports().size(), 1u);
  EXPECT_TRUE(Reports()[0].done);
  EXPECT_EQ(stand_in_.list_calls(), 1);
}

TEST_F(HeldWatchTest, DuringAHandoverAnUnreadableKubeletHoldsEveryGpuUntilItAnswers) {
  stand_in_.Hold("ml", "a", "main", "nvidia.com/gpu", {"GPU-1aaa"});
  stand_in_.SetAnswer(PodResourcesStandIn::Answer::kGarbage);
  std::unique_ptr<HeldWatch> w = Start(/*strict=*/true);
  HeldState first = Last();
  EXPECT_FALSE(first.done);
  EXPECT_FALSE(first.problem.empty());
  EXPECT_NE(first.problem.find(stand_in_.socket()), std::string::npos) << first.problem;
  ASSERT_EQ(first.holders.size(), 2u) << "a GPU of unknown state is never offered";
  EXPECT_NE(first.holders["GPU-0aaa"].find("cannot be read"), std::string::npos);
  // An error, then no answer at all (past the deadline): still every GPU.
  stand_in_.FailWith(grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet busy"));
  ASSERT_TRUE(WaitFor([&] { return Last().problem.find("kubelet busy") != std::string::npos; }));
  EXPECT_EQ(Last().holders.size(), 2u);
  stand_in_.SetAnswer(PodResourcesStandIn::Answer::kHold);
  ASSERT_TRUE(WaitFor([&] {
    const HeldState s = Last();
    return s.problem.find("kubelet busy") == std::string::npos && !s.problem.empty();
  })) << Last().problem;
  EXPECT_EQ(Last().holders.size(), 2u);
  // It answers: what the pods hold, no more.
  stand_in_.SetAnswer(PodResourcesStandIn::Answer::kTable);
  stand_in_.Release();
  ASSERT_TRUE(WaitFor([&] { return Last().problem.empty(); }));
  EXPECT_EQ(Last().holders,
            (std::map<std::string, std::string>{{"GPU-1aaa", "device-plugin pod ml/a"}}));
  w->Stop();
}

TEST_F(HeldWatchTest, OutsideAHandoverANodeWithoutPodResourcesHoldsNothing) {
  // A DRA node that never had a device plugin, PodResources not mounted.
  HeldWatchOptions o;
  o.socket = dir_.Join("no-such/kubelet.sock");
  std::unique_ptr<HeldWatch> w = HeldWatch::Start(o, model_, inv_, [this](const HeldState& s) {
    std::lock_guard<std::mutex> lock(mu_);
    reports_.push_back(s);
  });
  ASSERT_EQ(Reports().size(), 1u);
  EXPECT_TRUE(Reports()[0].done);
  EXPECT_TRUE(Reports()[0].holders.empty());
  EXPECT_FALSE(Reports()[0].problem.empty());
}

TEST_F(HeldWatchTest, OutsideAHandoverAKubeletThatAnswersGarbageHoldsEveryGpu) {
  stand_in_.SetAnswer(PodResourcesStandIn::Answer::kGarbage);
  std::unique_ptr<HeldWatch> w = Start(/*strict=*/false);
  EXPECT_FALSE(Last().done);
  EXPECT_EQ(Last().holders.size(), 2u) << "its socket is there: what pods hold is unknown";
  stand_in_.SetAnswer(PodResourcesStandIn::Answer::kTable);
  ASSERT_TRUE(WaitFor([&] { return Last().done; }));
  EXPECT_TRUE(Last().holders.empty());
}

TEST_F(HeldWatchTest, AGpuSeenHeldStaysHeldWhenTheKubeletStopsAnswering) {
  stand_in_.Hold("ml", "a", "main", "nvidia.com/gpu", {"GPU-1aaa"});
  std::unique_ptr<HeldWatch> w = Start(/*strict=*/false);
  ASSERT_EQ(Last().holders.size(), 1u);
  stand_in_.FailWith(grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet restarting"));
  ASSERT_TRUE(WaitFor([&] { return !Last().problem.empty(); }));
  EXPECT_FALSE(Last().done);
  EXPECT_EQ(Last().holders.count("GPU-1aaa"), 1u) << "pod ml/a still runs on it";
  w->Stop();
}

TEST_F(HeldWatchTest, OneEmptyAnswerAfterHoldersIsNotBelievedAlone) {
  stand_in_.Hold("ml", "a", "main", "nvidia.com/gpu", {"GPU-1aaa"});
  std::unique_ptr<HeldWatch> w = Start(/*strict=*/true);
  ASSERT_EQ(Last().holders.size(), 1u);
  // The pod ends: the first empty answer is checked by a second.
  const int calls = stand_in_.list_calls();
  stand_in_.EndPod("ml", "a");
  ASSERT_TRUE(WaitFor([&] { return Last().done; }));
  EXPECT_GE(stand_in_.list_calls(), calls + 2) << "done on one empty answer";
}

TEST_F(HeldWatchTest, StopIsPromptWhileTheKubeletHoldsTheCall) {
  stand_in_.Hold("ml", "a", "main", "nvidia.com/gpu", {"GPU-1aaa"});
  std::unique_ptr<HeldWatch> w = Start(/*strict=*/true);
  ASSERT_TRUE(WaitFor([&] { return stand_in_.list_calls() >= 3; }));
  // A List in flight the kubelet does not answer: Stop waits for it no
  // longer than its deadline (500 ms here).
  stand_in_.SetAnswer(PodResourcesStandIn::Answer::kHold);
  const int calls = stand_in_.list_calls();
  ASSERT_TRUE(WaitFor([&] { return stand_in_.list_calls() > calls; }));
  const auto t0 = std::chrono::steady_clock::now();
  w->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_FALSE(Last().done);
  stand_in_.Release();
}

}  // namespace
}  // namespace gpu_agent
