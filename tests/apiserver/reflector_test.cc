// The reflector against the API server stand-in, with a Node as what is
// watched: LIST then WATCH from the list's version, events delivered and
// their versions followed, a watch that ends resumed from the last version
// seen (no LIST), a 410 listed again, Interrupt running Sync again, and
// Cancel ending Run promptly whatever request is in progress.
#include "apiserver/reflector.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "api_server_stub.h"
#include "apiserver/node_client.h"
#include "support/proxy_connection.h"
#include "support/test_support.h"

namespace gpu_agent::apiserver {
namespace {

using gpu_agent::testing::ApiServerStub;
using gpu_agent::testing::WaitFor;

constexpr char kNode[] = "node-a";

// Watches one Node and records what the reflector asked of it.
class RecordingHandler : public ReflectorHandler {
 public:
  explicit RecordingHandler(RestClient* rest) : rest_(rest) {}

  std::optional<ReflectorFailure> List(std::string* version) override {
    absl::StatusOr<NodeList> list = NodeClient(rest_, kNode).List();
    if (!list.ok()) return ReflectorFailure{"cannot list", std::string(list.status().message())};
    *version = list->resource_version;
    std::lock_guard<std::mutex> lock(mu_);
    ++lists_;
    return std::nullopt;
  }
  Next Sync(std::optional<ReflectorFailure>*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++syncs_;
    return Next::kWatch;
  }
  std::string WatchPath(const std::string& version, std::chrono::seconds timeout) override {
    std::lock_guard<std::mutex> lock(mu_);
    watched_from_.push_back(version);
    return NodeClient(rest_, kNode).WatchPath(version, timeout);
  }
  bool OnEvent(ObjectEvent event) override {
    std::lock_guard<std::mutex> lock(mu_);
    event_versions_.push_back(event.resource_version);
    return true;
  }

  int lists() {
    std::lock_guard<std::mutex> lock(mu_);
    return lists_;
  }
  int syncs() {
    std::lock_guard<std::mutex> lock(mu_);
    return syncs_;
  }
  std::vector<std::string> watched_from() {
    std::lock_guard<std::mutex> lock(mu_);
    return watched_from_;
  }
  std::vector<std::string> event_versions() {
    std::lock_guard<std::mutex> lock(mu_);
    return event_versions_;
  }

 private:
  RestClient* const rest_;
  std::mutex mu_;
  int lists_ = 0;
  int syncs_ = 0;
  std::vector<std::string> watched_from_;
  std::vector<std::string> event_versions_;
};

class ReflectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.AddNode(kNode);
    absl::StatusOr<Connection> conn = gpu_agent::testing::ProxyConnection(api_.url());
    ASSERT_TRUE(conn.ok()) << conn.status();
    RestOptions watch_options;
    watch_options.read_timeout = std::chrono::seconds(90);
    absl::StatusOr<std::unique_ptr<RestClient>> rest = RestClient::Create(*conn, RestOptions{});
    absl::StatusOr<std::unique_ptr<RestClient>> watch = RestClient::Create(*conn, watch_options);
    ASSERT_TRUE(rest.ok() && watch.ok());
    rest_ = *std::move(rest);
    watch_ = *std::move(watch);
    handler_ = std::make_unique<RecordingHandler>(rest_.get());
  }
  void TearDown() override { Stop(); }
  void Start() {
    ReflectorOptions o;
    o.watch_timeout = std::chrono::seconds(30);
    o.backoff_initial = std::chrono::milliseconds(10);
    o.backoff_max = std::chrono::milliseconds(100);
    o.log_prefix = "test: ";
    reflector_ = std::make_unique<Reflector>(o, handler_.get(), rest_.get(), watch_.get(), &stats_);
    thread_ = std::thread([this] { reflector_->Run(); });
  }
  void Stop() {
    if (!thread_.joinable()) return;
    reflector_->Cancel();
    thread_.join();
  }
  // The version the Node's watch would report now: the stub's revision.
  std::string Revision() { return std::to_string(api_.revision()); }

  ApiServerStub api_;
  std::unique_ptr<RestClient> rest_, watch_;
  std::unique_ptr<RecordingHandler> handler_;
  ReflectorStats stats_;
  std::unique_ptr<Reflector> reflector_;
  std::thread thread_;
};

TEST_F(ReflectorTest, ListsThenWatchesFromTheListsVersionAndFollowsEvents) {
  const std::string listed_at = Revision();
  Start();
  ASSERT_TRUE(WaitFor([&] { return api_.open_watches() == 1; }));
  EXPECT_EQ(handler_->lists(), 1);
  ASSERT_EQ(handler_->watched_from().size(), 1u);
  EXPECT_EQ(handler_->watched_from()[0], listed_at);
  api_.KubeletSetsCapacity(kNode, "example.com/gpu", "4");
  ASSERT_TRUE(WaitFor([&] { return handler_->event_versions().size() == 1; }));
  EXPECT_EQ(handler_->event_versions()[0], Revision());
  EXPECT_EQ(stats_.lists, 1u);
  EXPECT_EQ(stats_.watches, 1u);
}

// A watch that ends (the server's timeout, or cut short: then backed off)
// is watched again from the last event's version, without a LIST.
TEST_F(ReflectorTest, AnEndedWatchResumesFromTheLastVersionSeen) {
  Start();
  ASSERT_TRUE(WaitFor([&] { return api_.open_watches() == 1; }));
  api_.KubeletSetsCapacity(kNode, "example.com/gpu", "4");
  ASSERT_TRUE(WaitFor([&] { return handler_->event_versions().size() == 1; }));
  const std::string last = handler_->event_versions()[0];
  api_.TouchOtherObjects(3);  // the revision moves on; the Node's version does not
  api_.EndWatches(/*gone=*/false);
  ASSERT_TRUE(WaitFor([&] { return handler_->watched_from().size() == 2; }));
  EXPECT_EQ(handler_->watched_from()[1], last);
  EXPECT_EQ(handler_->lists(), 1);
}

TEST_F(ReflectorTest, A410ListsAgainAndWatchesFromTheNewList) {
  Start();
  ASSERT_TRUE(WaitFor([&] { return api_.open_watches() == 1; }));
  api_.EndWatches(/*gone=*/true);
  ASSERT_TRUE(WaitFor([&] { return handler_->lists() == 2 && api_.open_watches() == 1; }));
  EXPECT_EQ(stats_.watch_expired, 1u);
  EXPECT_EQ(stats_.lists, 2u);
  const std::vector<std::string> from = handler_->watched_from();
  ASSERT_GE(from.size(), 3u);  // the first, the one answered 410, the one after the list
  EXPECT_EQ(from.back(), Revision());
}

TEST_F(ReflectorTest, InterruptEndsTheWatchAndSyncsAgain) {
  Start();
  ASSERT_TRUE(WaitFor([&] { return api_.open_watches() == 1; }));
  EXPECT_EQ(handler_->syncs(), 1);
  reflector_->Interrupt();
  ASSERT_TRUE(
      WaitFor([&] { return handler_->syncs() == 2 && handler_->watched_from().size() == 2; }));
  EXPECT_EQ(handler_->lists(), 1);
  EXPECT_EQ(stats_.watch_failures, 0u);
}

TEST_F(ReflectorTest, CancelEndsRunDuringAWatch) {
  Start();
  ASSERT_TRUE(WaitFor([&] { return api_.open_watches() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(ReflectorTest, CancelEndsRunDuringAHungList) {
  api_.HangLists(true);
  Start();
  ASSERT_TRUE(WaitFor([&] { return api_.list_count() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  api_.HangLists(false);
}

// Cancelled at once after the start: whatever it was about to send, Run
// returns (it used to take a loop of cancels).
TEST_F(ReflectorTest, CancelRightAfterTheStartIsNeverMissed) {
  for (int i = 0; i < 20; ++i) {
    rest_->Resume();
    watch_->Resume();
    Start();
    const auto t0 = std::chrono::steady_clock::now();
    Stop();
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "round " << i;
  }
}

}  // namespace
}  // namespace gpu_agent::apiserver
