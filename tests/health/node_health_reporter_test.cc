// GPU health on the Node, against the API server stand-in: one Event per
// transition (at most one per GPU and check a minute, on a fake clock), the
// GpuHealthy condition merged beside the kubelet's, and a server that
// refuses events (said once, the rest goes on).
#include "health/node_health_reporter.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <memory>
#include <string>

#include "api_server_stub.h"
#include "support/fake_clock.h"
#include "support/proxy_connection.h"
#include "support/test_support.h"

namespace gpu_agent::health {
namespace {

using gpu_agent::testing::ApiServerStub;
using gpu_agent::testing::FakeClock;
using gpu_agent::testing::WaitFor;
using std::chrono::seconds;

constexpr char kNode[] = "gpu-node-1";
constexpr char kUuid[] = "GPU-0eeb03b7-15a7-5ad5-8f6f-b0379ccc67f0";

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  EXPECT_FALSE(d.HasParseError()) << json;
  return d;
}

class NodeHealthReporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.AddNode(kNode);
    server_.SetCondition(kNode, "Ready", "True");
  }
  void Start() {
    absl::StatusOr<apiserver::Connection> conn = gpu_agent::testing::ProxyConnection(server_.url());
    ASSERT_TRUE(conn.ok()) << conn.status();
    NodeHealthReporterOptions o;
    o.node = kNode;
    o.clock = &clock_;
    o.retry = seconds(10);
    auto r = NodeHealthReporter::Start(*conn, o);
    ASSERT_TRUE(r.ok()) << r.status();
    reporter_ = *std::move(r);
  }
  std::string ConditionStatus() {
    const std::string c = server_.Condition(kNode, "GpuHealthy");
    if (c.empty()) return "";
    return Parse(c)["status"].GetString();
  }
  std::string ConditionMessage() {
    return Parse(server_.Condition(kNode, "GpuHealthy"))["message"].GetString();
  }
  void Advance(std::chrono::milliseconds d) {
    clock_.Advance(d);
    reporter_->Wake();
  }
  static GpuHealthNote Note(const std::string& check, Severity level, const std::string& value,
                            int index = 3) {
    return {kUuid, index, check, level, value};
  }

  ApiServerStub server_;
  FakeClock clock_;
  std::unique_ptr<NodeHealthReporter> reporter_;
};

TEST_F(NodeHealthReporterTest, ATransitionIsAnEventOnTheNodeAndTheCondition) {
  Start();
  // Nothing to say yet: the Node is read, not written.
  ASSERT_TRUE(WaitFor([&] { return server_.calls().count("get nodes") > 0; }));
  EXPECT_FALSE(WaitFor([&] { return server_.patch_count() > 0; }, std::chrono::milliseconds(200)))
      << server_.NodeJson(kNode);
  reporter_->Note(Note("nvlink", Severity::kUnhealthy, "1 of 18 links down (4)"));
  ASSERT_TRUE(WaitFor([&] { return server_.events().size() == 1; }));
  rapidjson::Document ev = Parse(server_.events()[0]);
  EXPECT_STREQ(ev["reason"].GetString(), "GpuUnhealthy");
  EXPECT_STREQ(ev["type"].GetString(), "Warning");
  EXPECT_EQ(std::string(ev["message"].GetString()),
            std::string("GPU 3 (") + kUuid + "): nvlink unhealthy: 1 of 18 links down (4)");
  EXPECT_STREQ(ev["involvedObject"]["kind"].GetString(), "Node");
  EXPECT_STREQ(ev["involvedObject"]["name"].GetString(), kNode);
  EXPECT_STREQ(ev["involvedObject"]["uid"].GetString(), kNode);
  EXPECT_STREQ(ev["metadata"]["namespace"].GetString(), "default");
  EXPECT_STREQ(ev["source"]["component"].GetString(), "gpu-agent");
  ASSERT_TRUE(WaitFor([&] { return ConditionStatus() == "False"; }));
  EXPECT_EQ(ConditionMessage(),
            std::string("GPU 3 (") + kUuid + "): nvlink unhealthy (1 of 18 links down (4))");
  EXPECT_STREQ(Parse(server_.Condition(kNode, "GpuHealthy"))["reason"].GetString(), "GpuUnhealthy");
  // The kubelet's condition is left alone (merged by type, not replaced).
  EXPECT_NE(server_.Condition(kNode, "Ready"), "");
  EXPECT_TRUE(server_.calls().count("create events"));
  EXPECT_TRUE(server_.calls().count("patch nodes/status"));
}

TEST_F(NodeHealthReporterTest, RecoveryIsAnEventAndTheConditionTurnsTrue) {
  Start();
  reporter_->Note(Note("temperature", Severity::kDegraded, "88 C"));
  ASSERT_TRUE(WaitFor([&] { return ConditionStatus() == "False"; }));
  EXPECT_STREQ(Parse(server_.Condition(kNode, "GpuHealthy"))["reason"].GetString(), "GpuDegraded");
  Advance(seconds(61));
  reporter_->Note(Note("temperature", Severity::kOk, "70 C"));
  ASSERT_TRUE(WaitFor([&] { return server_.events().size() == 2; }));
  rapidjson::Document ev = Parse(server_.events()[1]);
  EXPECT_STREQ(ev["reason"].GetString(), "GpuRecovered");
  EXPECT_STREQ(ev["type"].GetString(), "Normal");
  ASSERT_TRUE(WaitFor([&] { return ConditionStatus() == "True"; }));
}

TEST_F(NodeHealthReporterTest, AtMostOneEventPerGpuAndCheckAMinute) {
  Start();
  reporter_->Note(Note("pcieWidth", Severity::kDegraded, "x8 of x16"));
  ASSERT_TRUE(WaitFor([&] { return server_.events().size() == 1; }));
  // Within the minute: back, then degraded again, then unhealthy.
  reporter_->Note(Note("pcieWidth", Severity::kOk, "x16 of x16"));
  reporter_->Note(Note("pcieWidth", Severity::kUnhealthy, "x4 of x16"));
  // Another check of the same GPU is its own.
  reporter_->Note(Note("clockEvents", Severity::kDegraded, "power brake"));
  ASSERT_TRUE(WaitFor([&] { return server_.events().size() == 2; }));
  EXPECT_STREQ(Parse(server_.events()[1])["message"].GetString(),
               (std::string("GPU 3 (") + kUuid + "): clockEvents degraded: power brake").c_str());
  Advance(seconds(30));
  EXPECT_FALSE(
      WaitFor([&] { return server_.events().size() > 2; }, std::chrono::milliseconds(300)));
  Advance(seconds(30));
  ASSERT_TRUE(WaitFor([&] { return server_.events().size() == 3; }));
  rapidjson::Document ev = Parse(server_.events()[2]);
  EXPECT_STREQ(ev["reason"].GetString(), "GpuUnhealthy");  // where it ended
  // A flap that ends where it was gives no event.
  reporter_->Note(Note("pcieWidth", Severity::kOk, "x16 of x16"));
  reporter_->Note(Note("pcieWidth", Severity::kUnhealthy, "x4 of x16"));
  Advance(seconds(61));
  EXPECT_FALSE(
      WaitFor([&] { return server_.events().size() > 3; }, std::chrono::milliseconds(300)));
  EXPECT_GE(reporter_->stats().events_coalesced, 1u);
}

TEST_F(NodeHealthReporterTest, AServerThatRefusesEventsIsSaidOnceAndTheConditionGoesOn) {
  server_.Forbid("create events");
  ::testing::internal::CaptureStderr();
  Start();
  reporter_->Note(Note("nvlink", Severity::kUnhealthy, "1 of 18 links down (4)", 0));
  reporter_->Note(Note("recoveryAction", Severity::kUnhealthy, "GPU reset", 1));
  reporter_->Note(Note("xid", Severity::kUnhealthy, "XID 79", 2));
  ASSERT_TRUE(WaitFor([&] { return reporter_->stats().events_refused == 3; }));
  ASSERT_TRUE(WaitFor([&] { return ConditionStatus() == "False"; }));
  const std::string log = ::testing::internal::GetCapturedStderr();
  size_t said = 0;
  for (size_t at = 0; (at = log.find("did not take a GPU health event", at)) != std::string::npos;
       ++at) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << log;
  EXPECT_NE(log.find("events: create"), std::string::npos) << log;
  EXPECT_TRUE(server_.events().empty());
}

TEST_F(NodeHealthReporterTest, AFalseConditionAnEarlierAgentLeftIsSetRightAtStart) {
  server_.SetCondition(kNode, "GpuHealthy", "False");
  Start();
  ASSERT_TRUE(WaitFor([&] { return ConditionStatus() == "True"; }));
  EXPECT_NE(server_.Condition(kNode, "Ready"), "");
  EXPECT_TRUE(server_.events().empty());
}

TEST_F(NodeHealthReporterTest, AConditionTheServerRefusedIsTriedAgain) {
  server_.SetCondition(kNode, "GpuHealthy", "False");
  server_.FailNextPatches(500, 1);
  Start();
  ASSERT_TRUE(WaitFor([&] { return reporter_->stats().condition_errors == 1; }));
  EXPECT_EQ(ConditionStatus(), "False");
  Advance(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return ConditionStatus() == "True"; }));
}

// Stop() cancels a request in flight (a PATCH the server holds) and
// returns only once the sending thread is gone.
TEST_F(NodeHealthReporterTest, StopEndsARequestInFlightAndJoinsTheThread) {
  ASSERT_EQ(NodeHealthReporter::ThreadsRunning(), 0);
  server_.HangPatches(true);
  Start();
  ASSERT_TRUE(WaitFor([] { return NodeHealthReporter::ThreadsRunning() == 1; }));
  reporter_->Note(Note("xid", Severity::kUnhealthy, "XID 79"));
  ASSERT_TRUE(WaitFor([&] { return server_.held_patches() == 1; }));
  const auto asked = std::chrono::steady_clock::now();
  reporter_->Stop();
  const auto took = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(NodeHealthReporter::ThreadsRunning(), 0);
  EXPECT_LT(took, seconds(2));
  reporter_->Stop();  // a second Stop() finds nothing to join
  reporter_.reset();
  server_.HangPatches(false);
}

}  // namespace
}  // namespace gpu_agent::health
