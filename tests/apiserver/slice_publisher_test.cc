// SlicePublisher against the API server stand-in: slices created, kept
// through the kubelet deleting them and someone editing them, replaced under
// the next generation when the devices change, left alone in steady state
// and across a restart that finds them as wanted, and a 410 listing again.
#include "apiserver/slice_publisher.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "api_server_stub.h"
#include "apiserver/connection.h"
#include "support/test_support.h"

namespace gpu_agent::apiserver {
namespace {

using gpu_agent::testing::ApiServerStub;
using gpu_agent::testing::WaitFor;

constexpr char kNode[] = "node-a";
constexpr char kDriver[] = "gpu.gpu-agent.github.io";

// `devices` slices of one device each, named "<node>-<driver>-<i>".
SliceBuilder Slices(int devices, const std::string& node = kNode) {
  return [devices, node](const SliceContext& c) {
    const int64_t generation = c.generation;
    std::vector<std::string> out;
    for (int i = 0; i < devices; ++i) {
      out.push_back(
          R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":")" +
          node + "-" + kDriver + "-" + std::to_string(i) + R"("},"spec":{"driver":")" + kDriver +
          R"(","nodeName":")" + node + R"(","pool":{"name":")" + node + R"(","generation":)" +
          std::to_string(generation) + R"(,"resourceSliceCount":)" + std::to_string(devices) +
          R"(},"devices":[{"name":"gpu-)" + std::to_string(i) + R"("}]}})");
    }
    return out;
  };
}

int64_t Generation(const std::string& slice) {
  rapidjson::Document d;
  d.Parse(slice.c_str());
  return d["spec"]["pool"]["generation"].GetInt64();
}

class SlicePublisherTest : public ::testing::Test {
 protected:
  void Start(SliceBuilder b) {
    ConnectionOptions options;
    options.proxy = api_.url();
    absl::StatusOr<Connection> conn =
        ResolveConnection(options, [](const std::string&) { return std::optional<std::string>(); });
    ASSERT_TRUE(conn.ok()) << conn.status();
    SlicePublisherOptions o;
    o.driver = kDriver;
    o.node = kNode;
    o.api_version = api_version_;
    o.watch_timeout = std::chrono::seconds(30);
    o.backoff_initial = std::chrono::milliseconds(20);
    auto p = SlicePublisher::Start(*conn, RestOptions{}, o, std::move(b));
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = *std::move(p);
  }
  bool SlicesAre(size_t n, int64_t generation) {
    return WaitFor([&] {
      std::vector<std::string> s = api_.Slices(kNode);
      if (s.size() != n) return false;
      for (const std::string& x : s) {
        if (Generation(x) != generation) return false;
      }
      return true;
    });
  }

  ApiServerStub api_;
  std::string api_version_ = "v1";
  std::unique_ptr<SlicePublisher> publisher_;
};

TEST_F(SlicePublisherTest, PublishesAndThenSendsNothingInSteadyState) {
  api_.ServeResourceVersions({"v1beta1", "v1"});
  api_.AddNode(kNode);
  api_version_.clear();  // discovered: v1 is preferred to v1beta1
  std::string asked;
  Start([&asked](const SliceContext& c) {
    asked = c.api_version + " " + c.node_uid;
    return Slices(2)(c);
  });
  ASSERT_TRUE(SlicesAre(2, 1));
  EXPECT_EQ(api_.slice_writes(), 2);
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 1; }));
  // The publisher counts a watch as it sends it; the window below starts
  // once the server has it.
  ASSERT_TRUE(WaitFor([&] { return api_.calls().count("watch resourceslices") > 0; }));
  EXPECT_EQ(asked.substr(0, 3), "v1 ");
  EXPECT_GT(asked.size(), 3u);  // the Node's UID
  EXPECT_TRUE(api_.calls().count("list resourceslices"));
  EXPECT_FALSE(api_.calls().count("patch resourceslices"));
  const auto since = std::chrono::steady_clock::now();
  gpu_agent::testing::MeasurementWindow(std::chrono::milliseconds(500));
  EXPECT_EQ(api_.RequestsSince(since), 0);
  EXPECT_EQ(api_.slice_writes(), 2);
}

TEST_F(SlicePublisherTest, TheKubeletDeletingEverySliceIsRepairedUnderTheSameGeneration) {
  Start(Slices(2));
  ASSERT_TRUE(SlicesAre(2, 1));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 1; }));
  api_.DeleteNodeSlices(kNode);
  ASSERT_TRUE(SlicesAre(2, 1));
  EXPECT_GE(publisher_->stats().repairs, 1u);
}

TEST_F(SlicePublisherTest, AnEditedSliceIsPutBack) {
  Start(Slices(1));
  ASSERT_TRUE(SlicesAre(1, 1));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 1; }));
  const std::string name = std::string(kNode) + "-" + kDriver + "-0";
  api_.EmptySliceDevices(name);
  ASSERT_TRUE(WaitFor([&] {
    std::vector<std::string> s = api_.Slices(kNode);
    return s.size() == 1 && s[0].find("gpu-0") != std::string::npos;
  }));
  // Counted once the answer is read, which may be just after the test sees
  // the slice.
  EXPECT_TRUE(WaitFor([&] { return publisher_->stats().updates == 1u; }));
}

TEST_F(SlicePublisherTest, AChangeIsTheNextGenerationAndSurplusSlicesGo) {
  Start(Slices(3));
  ASSERT_TRUE(SlicesAre(3, 1));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 1; }));
  publisher_->SetDesired(Slices(2));
  ASSERT_TRUE(SlicesAre(2, 2));
  EXPECT_EQ(publisher_->stats().generation, 2);
  EXPECT_TRUE(WaitFor([&] { return publisher_->stats().deletes == 1u; }));
}

TEST_F(SlicePublisherTest, ARestartKeepsAMatchingGenerationAndBumpsAChangedOne) {
  Start(Slices(2));
  ASSERT_TRUE(SlicesAre(2, 1));
  publisher_->Stop();
  const int writes = api_.slice_writes();
  Start(Slices(2));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().in_sync.load(); }));
  EXPECT_EQ(api_.slice_writes(), writes);
  EXPECT_EQ(publisher_->stats().generation, 1);
  publisher_->Stop();
  Start(Slices(1));
  ASSERT_TRUE(SlicesAre(1, 2));
}

TEST_F(SlicePublisherTest, A410ListsAgainAndRepairsStillWork) {
  Start(Slices(1));
  ASSERT_TRUE(SlicesAre(1, 1));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 1; }));
  api_.ExpireSliceWatches();
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().lists >= 2; }));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 2; }));
  api_.DeleteNodeSlices(kNode);
  ASSERT_TRUE(SlicesAre(1, 1));
}

}  // namespace
}  // namespace gpu_agent::apiserver
