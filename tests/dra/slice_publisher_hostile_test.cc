// An API server that is compromised or broken, against the ResourceSlice
// publisher: a watch line with no newline, a watch that drips a byte at a
// time past its timeout, watch events nested 200,000 deep, 410 on every
// watch, watches ended at once, a list that ignores the field selector.
// Nothing may crash the agent, grow it past its caps, or turn into a
// request storm; once the server behaves, the slices are repaired.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "apiserver/rest_client.h"
#include "dra/slice_publisher.h"
#include "support/proxy_connection.h"
#include "support/slice_json.h"
#include "support/test_support.h"

namespace gpu_agent::dra {
namespace {

using apiserver::Connection;
using apiserver::RestOptions;

using gpu_agent::testing::ApiServerStub;
using gpu_agent::testing::WaitFor;
using Ms = std::chrono::milliseconds;

constexpr char kNode[] = "node-a";
constexpr char kDriver[] = "gpu.gpu-agent.github.io";

std::string OneSlice(const SliceContext& c) {
  return gpu_agent::testing::SliceJson(kNode, kDriver, 0, 1, c.generation,
                                       gpu_agent::testing::NamedDevice(0));
}

class SlicePublisherHostileTest : public ::testing::Test {
 protected:
  void SetUp() override { api_.AddNode(kNode); }
  void Start() {
    absl::StatusOr<Connection> conn = gpu_agent::testing::ProxyConnection(api_.url());
    ASSERT_TRUE(conn.ok()) << conn.status();
    SlicePublisherOptions o;
    o.driver = kDriver;
    o.node = kNode;
    o.api_version = "v1";
    o.watch_timeout = watch_timeout_;
    o.backoff_initial = backoff_initial_;
    o.backoff_max = backoff_max_;
    auto p = SlicePublisher::Start(*conn, rest_, o, [](const SliceContext& c) {
      return std::vector<std::string>{OneSlice(c)};
    });
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = *std::move(p);
    ASSERT_TRUE(WaitFor([&] { return api_.Slices(kNode).size() == 1; }));
    ASSERT_TRUE(WaitFor([&] { return api_.calls().count("watch resourceslices") > 0; }));
  }
  // Requests of `call` from the `since`-th logged request on.
  std::vector<ApiServerStub::Request> Calls(const std::string& call, size_t since = 0) {
    std::vector<ApiServerStub::Request> out;
    const std::vector<ApiServerStub::Request> log = api_.requests();
    for (size_t i = since; i < log.size(); ++i) {
      if (log[i].call == call) out.push_back(log[i]);
    }
    return out;
  }
  // Once the server behaves again, a slice the kubelet deleted is put back:
  // the publisher's thread is alive and well.
  void ExpectRepairedOnceTheServerBehaves(const std::string& call) {
    api_.AnswerNormally(call);
    api_.ExpireSliceWatches();
    api_.DeleteNodeSlices(kNode);
    EXPECT_TRUE(WaitFor([&] { return api_.Slices(kNode).size() == 1; }, std::chrono::seconds(20)));
  }

  // Every watch answered `answer` (200) and ended at once: the sixth watch
  // waits past 500 ms (with backoff_initial_ 100 ms the fifth failure in a
  // row waits 100 ms x 2^3, +-20 %, and a list), then the slices are
  // repaired once the server behaves.
  void ExpectWatchesEndedAtOnceBackedOff(const std::string& answer, const char* why) {
    const size_t log = api_.requests().size();
    api_.AnswerWith("watch resourceslices", answer);
    api_.ExpireSliceWatches();
    ASSERT_TRUE(WaitFor([&] { return Calls("watch resourceslices", log).size() >= 6; },
                        std::chrono::seconds(20)));
    const std::vector<ApiServerStub::Request> watches = Calls("watch resourceslices", log);
    const double last_gap =
        std::chrono::duration<double, std::milli>(watches[5].at - watches[4].at).count();
    EXPECT_GT(last_gap, 500) << why;
    ExpectRepairedOnceTheServerBehaves("watch resourceslices");
  }

  ApiServerStub api_;
  RestOptions rest_;
  std::chrono::seconds watch_timeout_{30};
  Ms backoff_initial_{20};
  Ms backoff_max_{2000};
  std::unique_ptr<SlicePublisher> publisher_;
};

// 200,000 '[' in a watch event (400 KB, well under the body cap) overflowed
// the stack of the recursive parser: SIGSEGV.
TEST_F(SlicePublisherHostileTest, AWatchEventNestedPastTheLimitIsSkipped) {
  Start();
  const size_t log = api_.requests().size();
  api_.AnswerWith("watch resourceslices", std::string(200000, '[') + "\n");
  api_.ExpireSliceWatches();
  ASSERT_TRUE(WaitFor([&] { return Calls("watch resourceslices", log).size() >= 3; }));
  ExpectRepairedOnceTheServerBehaves("watch resourceslices");
}

// A watch line with no newline grew the agent by 300 MB (and kept it): the
// unfinished line is capped at the object size limit.
TEST_F(SlicePublisherHostileTest, AWatchLineThatNeverEndsIsCutAtTheObjectLimit) {
  Start();
  const uint64_t errors = publisher_->stats().errors;
  api_.AnswerWith("watch resourceslices", std::string(64 << 10, 'x'), /*forever=*/true);
  api_.ExpireSliceWatches();
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().errors > errors; }));
  // The publisher read at most the 8 MiB limit and a chunk; the rest of what
  // the server sent sits in socket buffers, a few MiB at most.
  EXPECT_LT(api_.hostile_bytes_sent(), 32u << 20);
  ExpectRepairedOnceTheServerBehaves("watch resourceslices");
}

// A server that answers every watch with 410: listed again at once the
// first time, then backed off, the waits growing. Before, a successful list
// started the backoff over each time: 5-6 requests a second, for good.
TEST_F(SlicePublisherHostileTest, A410OnEveryWatchIsNotARequestStorm) {
  backoff_initial_ = Ms(100);
  backoff_max_ = Ms(10000);
  Start();
  const size_t log = api_.requests().size();
  api_.AnswerWith("watch resourceslices",
                  R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":)"
                  R"("Failure","message":"too old resource version","reason":"Expired",)"
                  R"("code":410}})"
                  "\n");
  api_.ExpireSliceWatches();
  ASSERT_TRUE(WaitFor([&] { return Calls("list resourceslices", log).size() >= 7; },
                      std::chrono::seconds(20)));
  const std::vector<ApiServerStub::Request> lists = Calls("list resourceslices", log);
  std::vector<double> gaps;
  for (size_t i = 1; i < lists.size(); ++i) {
    gaps.push_back(
        std::chrono::duration<double, std::milli>(lists[i].at - lists[i - 1].at).count());
  }
  // Waits of 100, 200, 400, 800, 1600 ms (+-20 %) between the watches:
  // each gap longer than the one before, from the second on, and the last
  // over a second (without the backoff: a few ms each, for good).
  for (size_t i = 2; i < gaps.size(); ++i) {
    EXPECT_GT(gaps[i], gaps[i - 1] * 1.1)
        << "gap " << i << ": " << gaps[i] << " ms after " << gaps[i - 1] << " ms";
  }
  EXPECT_GT(gaps.back(), 1000);
  EXPECT_GE(publisher_->stats().watch_expired, 6u);
  ExpectRepairedOnceTheServerBehaves("watch resourceslices");
}

// Every watch answered with nothing and ended at once: backed off as a
// failure, not watched again at once.
TEST_F(SlicePublisherHostileTest, WatchesEndedAtOnceAreBackedOff) {
  backoff_initial_ = Ms(100);
  Start();
  ExpectWatchesEndedAtOnceBackedOff("", "watches ended at once are retried without a backoff");
}

// A watch answered with one bookmark and ended at once, every time: an
// event in it does not make it a good watch, so the next waits grow (it
// was watched again at once, for good).
TEST_F(SlicePublisherHostileTest, WatchesEndedAtOnceAfterABookmarkAreBackedOff) {
  backoff_initial_ = Ms(100);
  Start();
  ExpectWatchesEndedAtOnceBackedOff(R"({"type":"BOOKMARK","object":{"kind":"ResourceSlice",)"
                                    R"("metadata":{"resourceVersion":"1"}}})"
                                    "\n",
                                    "watches ended at once after an event are retried at once");
}

// A server (or proxy) that ignores the field selector and lists another
// node's slices too: those are left alone, never deleted as surplus.
TEST_F(SlicePublisherHostileTest, AnotherNodesSlicesInTheListAreLeftAlone) {
  Start();
  std::string other = OneSlice(SliceContext{"v1", "", 1});
  for (const std::string& from : {std::string("\"node-a-"), std::string("\"node-a\"")}) {
    for (size_t at = other.find(from); at != std::string::npos; at = other.find(from, at + 1)) {
      other.replace(at, from.size(), from == "\"node-a-" ? "\"node-b-" : "\"node-b\"");
    }
  }
  api_.AddSlice(other);
  ASSERT_EQ(api_.Slices("node-b").size(), 1u);
  const std::string mine = api_.Slices(kNode).at(0);
  api_.AnswerWith("list resourceslices",
                  R"({"kind":"ResourceSliceList","apiVersion":"resource.k8s.io/v1",)"
                  R"("metadata":{"resourceVersion":"1"},"items":[)" +
                      mine + "," + other + "]}");
  const uint64_t lists = publisher_->stats().lists;
  api_.ExpireSliceWatches();
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().lists > lists; }));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 2; }));
  EXPECT_EQ(api_.Slices("node-b").size(), 1u);
  api_.AnswerNormally("list resourceslices");
}

// A watch that drips bytes past its timeout is ended by the agent and
// counted as a failure.
TEST_F(SlicePublisherHostileTest, AWatchDrippingPastItsTimeoutIsEnded) {
  rest_.stream_grace = Ms(500);
  watch_timeout_ = std::chrono::seconds(1);
  Start();
  const uint64_t errors = publisher_->stats().errors;
  api_.AnswerWith("watch resourceslices", " ", /*forever=*/true, Ms(100));
  api_.ExpireSliceWatches();
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().errors > errors; }));
  ExpectRepairedOnceTheServerBehaves("watch resourceslices");
}

}  // namespace
}  // namespace gpu_agent::dra
