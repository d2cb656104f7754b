// SlicePublisher against the API server stand-in: slices created, kept
// through the kubelet deleting them and someone editing them, replaced under
// the next generation when the devices change, left alone in steady state
// and across a restart that finds them as wanted, a 410 listing again, and
// every refusal of every request (403, 409, 410, 429 with and without
// Retry-After, 500) logged, retried after a backoff and ending in the
// slices as wanted, with no more writes than the refusals themselves.
#include "dra/slice_publisher.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <cctype>

#include "api_server_stub.h"
#include "apiserver/connection.h"
#include "support/proxy_connection.h"
#include "support/slice_json.h"
#include "support/test_support.h"

namespace gpu_agent::dra {
namespace {

using apiserver::Connection;
using apiserver::RestOptions;

using gpu_agent::testing::ApiServerStub;
using gpu_agent::testing::NamedDevice;
using gpu_agent::testing::SliceJson;
using gpu_agent::testing::WaitFor;

constexpr char kNode[] = "node-a";
constexpr char kDriver[] = "gpu.gpu-agent.github.io";

// `devices` slices of one device each, named "<node>-<driver>-<i>".
SliceBuilder Slices(int devices, const std::string& node = kNode) {
  return [devices, node](const SliceContext& c) {
    const int64_t generation = c.generation;
    std::vector<std::string> out;
    for (int i = 0; i < devices; ++i) {
      out.push_back(SliceJson(node, kDriver, i, devices, generation, NamedDevice(i)));
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
    absl::StatusOr<Connection> conn = gpu_agent::testing::ProxyConnection(api_.url());
    ASSERT_TRUE(conn.ok()) << conn.status();
    SlicePublisherOptions o;
    o.driver = kDriver;
    o.node = node_;
    o.api_version = api_version_;
    o.watch_timeout = std::chrono::seconds(30);
    o.backoff_initial = std::chrono::milliseconds(20);
    o.probe_device_taints = probe_taints_;
    o.probe_sharing = probe_sharing_;
    o.forbidden_for_good = forbidden_for_good_;
    auto p = SlicePublisher::Start(*conn, RestOptions{}, o, std::move(b));
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = *std::move(p);
  }
  bool SlicesAre(size_t n, int64_t generation) {
    return WaitFor([&] {
      std::vector<std::string> s = api_.Slices(node_);
      if (s.size() != n) return false;
      for (const std::string& x : s) {
        if (Generation(x) != generation) return false;
      }
      return true;
    });
  }

  ApiServerStub api_;
  std::string node_ = kNode;  // the publisher's
  std::string api_version_ = "v1";
  bool probe_taints_ = false;
  bool probe_sharing_ = false;
  std::chrono::milliseconds forbidden_for_good_{30000};
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
  // A turn of its loop with nothing to do: the same slices posted again end
  // the watch, and all it may send is the next watch (no list, no write).
  publisher_->SetDesired(Slices(2));
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 2; }));
  ASSERT_TRUE(WaitFor([&] { return api_.RequestsSince(since) >= 1; }));
  EXPECT_EQ(api_.RequestsSince(since), 1);
  EXPECT_EQ(api_.requests().back().call, "watch resourceslices");
  EXPECT_EQ(publisher_->stats().lists, 1u);
  EXPECT_EQ(publisher_->stats().creates + publisher_->stats().updates, 2u);
  EXPECT_EQ(api_.slice_writes(), 2);
}

// The Node cannot be read at the start (its GETs break off): the slices go
// out without an owner, the Node is asked again with a backoff, and once it
// answers the same slices are replaced with their owner, same generation.
TEST_F(SlicePublisherTest, ANodeUnreadableAtTheStartBecomesTheSlicesOwnerOnceItAnswers) {
  api_.AddNode(kNode);
  api_.DropNextGets(4);
  Start([](const SliceContext& c) {
    std::vector<std::string> out = Slices(2)(c);
    if (c.node_uid.empty()) return out;
    for (std::string& x : out) {
      const std::string owner = R"("ownerReferences":[{"apiVersion":"v1","kind":"Node","name":")" +
                                std::string(kNode) + R"(","uid":")" + c.node_uid + R"("}],)";
      x.insert(x.find(R"("metadata":{)") + 12, owner);
    }
    return out;
  });
  ASSERT_TRUE(SlicesAre(2, 1));
  ASSERT_TRUE(WaitFor([&] {
    for (const std::string& x : api_.Slices(kNode)) {
      if (x.find(R"("kind":"Node")") == std::string::npos) return false;
    }
    return true;
  })) << api_.Slices(kNode).at(0);
  EXPECT_TRUE(SlicesAre(2, 1));
  // Created without an owner, then replaced once with it.
  EXPECT_EQ(api_.slice_writes(), 4);
  EXPECT_GE(api_.calls().count("get nodes"), 1u);
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
  // Listed again at once, not as a failure.
  EXPECT_EQ(publisher_->stats().watch_expired, 1u);
  EXPECT_EQ(publisher_->stats().errors, 0u);
  api_.DeleteNodeSlices(kNode);
  ASSERT_TRUE(SlicesAre(1, 1));
}

// One refused request kind: the server refuses the first two requests of
// `verb` with `code` (and Retry-After when `retry_after_s` >= 0).
struct Refusal {
  const char* verb;
  int code;
  int retry_after_s;
  const char* logged;  // in the warning
};

std::string Describe(const Refusal& r) {
  return std::string(r.verb) + " " + std::to_string(r.code) +
         (r.retry_after_s >= 0 ? " Retry-After " + std::to_string(r.retry_after_s) : "");
}

TEST_F(SlicePublisherTest, EveryRefusalIsLoggedRetriedAfterABackoffAndEndsInTheWantedSlices) {
  std::vector<Refusal> cases;
  const std::vector<std::pair<const char*, const char*>> verbs = {
      {"list", "cannot list them; retrying"},
      {"watch", "cannot watch them; retrying"},
      {"create", "cannot create node-a-gpu.gpu-agent.github.io-0; retrying"},
      {"update", "cannot update node-a-gpu.gpu-agent.github.io-0; retrying"},
      {"delete", "cannot delete node-a-gpu.gpu-agent.github.io-5; retrying"}};
  for (const auto& [verb, logged] : verbs) {
    for (int code : {403, 409, 410, 429, 500}) {
      // A watch answered 410 lists again at once; a second one soon after
      // backs off.
      const char* what = std::string(verb) == "watch" && code == 410
                             ? "the watch expired again soon after a list; retrying"
                             : logged;
      cases.push_back({verb, code, -1, what});
      if (code == 429 || code == 500) cases.push_back({verb, code, 1, what});
    }
  }
  constexpr int kTimes = 2;
  for (const Refusal& c : cases) {
    SCOPED_TRACE(Describe(c));
    api_.DeleteNodeSlices(kNode);
    // update: a slice of the same name holding another device; delete: a
    // surplus slice. Either way the publisher starts the next generation.
    int writes = 2;  // the two creates
    int64_t generation = 1;
    const std::string verb = c.verb;
    if (verb == "update" || verb == "delete") {
      std::string old = Slices(1)(SliceContext{"v1", "", 1})[0];
      if (verb == "update") {
        old.replace(old.find("gpu-0"), 5, "gpu-9");
        writes = 2;  // one update, one create
      } else {
        old.replace(old.find("github.io-0"), 11, "github.io-5");
        writes = 3;  // two creates, one delete
      }
      api_.AddSlice(old);
      generation = 2;
    }
    const int writes_before = api_.slice_writes();
    const int failed_before = api_.failed_slice_requests();
    const size_t requests_before = api_.requests().size();
    api_.FailNextSliceRequests(c.verb, c.code, kTimes, c.retry_after_s);
    // The slice requests since, and the index of the last refused one (or
    // their count, before it).
    std::vector<ApiServerStub::Request> requests;
    size_t last = 0;
    auto read_requests = [&] {
      requests = api_.requests();
      requests.erase(requests.begin(), requests.begin() + requests_before);
      requests.erase(std::remove_if(requests.begin(), requests.end(),
                                    [](const ApiServerStub::Request& r) {
                                      return r.call.find("resourceslices") == std::string::npos;
                                    }),
                     requests.end());
      int seen = 0;
      last = requests.size();
      for (size_t i = 0; i < requests.size(); ++i) {
        if (requests[i].call == verb + " resourceslices" && ++seen == kTimes) last = i;
      }
    };
    ::testing::internal::CaptureStderr();
    Start(Slices(2));
    // In sync again after a request that followed the last refusal (the
    // stats alone may still show the state from before that refusal).
    const bool synced = SlicesAre(2, generation) && WaitFor([&] {
                          if (api_.failed_slice_requests() != failed_before + kTimes) return false;
                          read_requests();
                          return last + 1 < requests.size() && publisher_->stats().in_sync.load();
                        });
    const bool watching = WaitFor([&] { return publisher_->stats().watches >= 1; });
    publisher_->Stop();
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(synced) << log;
    ASSERT_TRUE(watching);
    EXPECT_NE(log.find(c.logged), std::string::npos) << log;
    EXPECT_NE(log.find(std::to_string(c.code)), std::string::npos) << log;
    if (c.code == 403) {
      // Refused for a moment: what is known, no guess at the role.
      EXPECT_NE(log.find("the API server's authorization refused it"), std::string::npos) << log;
      EXPECT_EQ(log.find("ClusterRole must allow"), std::string::npos) << log;
    }
    // No write storm: what the slices needed, and the refused writes.
    const bool write_verb = verb == "create" || verb == "update" || verb == "delete";
    EXPECT_EQ(api_.slice_writes() - writes_before, writes + (write_verb ? kTimes : 0));
    // The request after the last refusal waited the backoff (at least
    // 0.8 * 20 ms), or the Retry-After when the server sent one.
    read_requests();
    ASSERT_LT(last + 1, requests.size());
    const auto gap = requests[last + 1].at - requests[last].at;
    EXPECT_GE(gap, c.retry_after_s >= 0 ? std::chrono::milliseconds(1000 * c.retry_after_s)
                                        : std::chrono::milliseconds(15));
    // And not much more (bounded loosely: a shared runner may be slow).
    EXPECT_LT(gap, c.retry_after_s >= 0 ? std::chrono::milliseconds(1000 * c.retry_after_s + 5000)
                                        : std::chrono::milliseconds(5000));
  }
}

// The create requests of the probe: those for no slice the publisher keeps
// (named "<node>-<driver>-<n>").
std::vector<ApiServerStub::Request> Probes(const ApiServerStub& api, size_t since = 0) {
  auto publishers = [](std::string name) {
    while (!name.empty() && std::isdigit(static_cast<unsigned char>(name.back()))) name.pop_back();
    const std::string tail = std::string("-") + kDriver + "-";
    return name.size() > tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::vector<ApiServerStub::Request> out;
  const std::vector<ApiServerStub::Request> log = api.requests();
  for (size_t i = since; i < log.size(); ++i) {
    if (log[i].call == "create resourceslices" && !publishers(log[i].name)) out.push_back(log[i]);
  }
  return out;
}

// The servers of 1.32 to 1.35 with the gate off (taints dropped), 1.33 to
// 1.35 with it on (taints kept, the None effect refused: asked again
// without it) and 1.36 (both kept).
TEST_F(SlicePublisherTest, TheFeatureProbeTellsWhetherTheServerKeepsTaintsAndStoresNothing) {
  probe_taints_ = true;
  struct Server {
    const char* name;
    bool taints, none;
    size_t probes;
  };
  for (const char* version : {"v1", "v1beta1"}) {
    for (const Server& server : {Server{"dropped", false, false, 1}, Server{"kept", true, false, 2},
                                 Server{"kept with None", true, true, 1}}) {
      SCOPED_TRACE(std::string(version) + " " + server.name);
      api_.ServeDeviceTaints(server.taints);
      api_.ServeNoneTaintEffect(server.none);
      api_version_ = version;
      std::atomic<int> asked{-1}, none{-1};
      const size_t requests = api_.requests().size();
      Start([&asked, &none](const SliceContext& c) {
        asked = c.device_taints ? 1 : 0;
        none = c.none_taint_effect ? 1 : 0;
        return Slices(1)(c);
      });
      ASSERT_TRUE(WaitFor([&] { return publisher_->stats().in_sync.load(); }));
      EXPECT_EQ(asked, server.taints ? 1 : 0);
      EXPECT_EQ(none, server.none ? 1 : 0);
      publisher_->Stop();
      // Probes sent as dry runs...
      const std::vector<ApiServerStub::Request> probes = Probes(api_, requests);
      ASSERT_EQ(probes.size(), server.probes);
      for (const ApiServerStub::Request& p : probes) {
        EXPECT_TRUE(p.dry_run);
        EXPECT_NE(p.name.find("-probe-"), std::string::npos) << p.name;
      }
      // ... and nothing stored but the publisher's own slice, once.
      EXPECT_EQ(api_.stored_slice_names(),
                std::vector<std::string>{std::string(kNode) + "-" + kDriver + "-0"});
      ASSERT_EQ(api_.Slices(kNode).size(), 1u);
      EXPECT_EQ(api_.Slices(kNode)[0].find("probe"), std::string::npos);
    }
  }
}

// A node name of the longest kind (253 characters): the probe still has a
// valid name, so the server's answer is about taints.
TEST_F(SlicePublisherTest, TheFeatureProbeHasAValidNameHoweverLongTheNodeName) {
  probe_taints_ = true;
  node_ = std::string(63, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') + "." +
          std::string(61, 'd');
  ASSERT_EQ(node_.size(), 253u);
  api_.AddNode(node_);
  api_.ServeDeviceTaints(true);
  api_.ServeNoneTaintEffect(true);
  std::atomic<int> asked{-1};
  const std::string node = node_;
  ::testing::internal::CaptureStderr();
  // The slice itself gets a short name: the probe's is the one under test.
  Start([&asked, node](const SliceContext& c) {
    asked = c.device_taints ? 1 : 0;
    std::string slice = Slices(1, node)(c)[0];
    const std::string name = node + "-" + kDriver + "-0";
    slice.replace(slice.find(name), name.size(), std::string("long-node-") + kDriver + "-0");
    return std::vector<std::string>{slice};
  });
  const bool synced = WaitFor([&] { return publisher_->stats().in_sync.load(); });
  publisher_->Stop();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(synced) << log;
  EXPECT_EQ(asked, 1) << log;
  const std::vector<ApiServerStub::Request> probes = Probes(api_);
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_TRUE(probes[0].dry_run);
  EXPECT_LE(probes[0].name.size(), 253u);
  EXPECT_EQ(log.find("is invalid"), std::string::npos) << log;
}

// Two devices; gpu-1 unhealthy for `reason`: where the server keeps taints
// it stays with a NoSchedule taint whose value is the reason, otherwise it
// leaves, as DRA mode builds them.
SliceBuilder OneUnhealthy(const std::string& reason, const std::string& node) {
  return [reason, node](const SliceContext& c) {
    const std::string taint = R"(,{"name":"gpu-1","taints":[{"key":")" + std::string(kDriver) +
                              R"(/unhealthy","value":")" + reason + R"(","effect":"NoSchedule"}]})";
    return std::vector<std::string>{SliceJson(node, kDriver, 0, 1, c.generation,
                                              NamedDevice(0) + (c.device_taints ? taint : ""))};
  };
}

// gpu-1 in the node's one slice: "absent", "healthy" or its taint's value.
std::string Gpu1(const ApiServerStub& api, const std::string& node) {
  const std::vector<std::string> slices = api.Slices(node);
  if (slices.size() != 1) return "no slice";
  rapidjson::Document d;
  d.Parse(slices[0].c_str());
  for (const auto& dev : d["spec"]["devices"].GetArray()) {
    if (dev["name"] != "gpu-1") continue;
    if (!dev.HasMember("taints")) return "healthy";
    return dev["taints"][0]["value"].GetString();
  }
  return "absent";
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// In `log`: a 403 first said only that the server's authorization refused
// it, and later named the ClusterRole as lacking `verb` on resourceslices.
void ExpectTheRoleNamedLater(const std::string& log, const std::string& verb) {
  const size_t first = log.find("the API server's authorization refused it");
  const size_t role =
      log.find("now: the agent's ClusterRole must allow " + verb + " on resourceslices");
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_NE(role, std::string::npos) << log;
  EXPECT_LT(first, role) << log;
}

// Every request refused 403 for longer than forbidden_for_good (30 s by
// default; 50 ms here): then the role is named as what lacks the
// permission. A success in between starts the count again.
TEST_F(SlicePublisherTest, A403ThatLastsNamesTheClusterRole) {
  api_.FailNextSliceRequests("list", 403, 1000);
  ::testing::internal::CaptureStderr();
  forbidden_for_good_ = std::chrono::milliseconds(50);
  Start(Slices(1));
  const bool named = WaitFor([&] { return publisher_->stats().errors >= 4; });
  publisher_->Stop();
  api_.ClearQueuedFailures();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(named) << log;
  ExpectTheRoleNamedLater(log, "list");
}

// The probe refused or unanswered is asked again, with a backoff, until the
// server answers; meanwhile an unhealthy device leaves the slices, and once
// taints are known to be kept it comes back tainted under the next
// generation. The same failure again is logged once.
TEST_F(SlicePublisherTest, AFailedFeatureProbeIsAskedAgainUntilTheServerAnswers) {
  probe_taints_ = true;
  api_.ServeDeviceTaints(true);
  api_.ServeNoneTaintEffect(true);
  // A role without the right (its own message), and a server in trouble
  // (429 and 500 take the same path: no clear answer, asked again).
  for (int code : {403, 503}) {
    SCOPED_TRACE(code);
    node_ = "node-" + std::to_string(code);
    api_.AddNode(node_);
    api_.FailNextSliceRequests("dryRun create", code, 2);
    const size_t requests = api_.requests().size();
    const size_t stored = api_.stored_slice_names().size();
    ::testing::internal::CaptureStderr();
    Start(OneUnhealthy("XID-79", node_));
    const bool tainted = WaitFor([&] { return Gpu1(api_, node_) == "XID-79"; });
    const bool synced = WaitFor([&] { return publisher_->stats().in_sync.load(); });
    publisher_->Stop();
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(tainted) << Gpu1(api_, node_) << "\n" << log;
    ASSERT_TRUE(synced) << log;
    // Published without gpu-1 (generation 1), then with it tainted (2).
    EXPECT_TRUE(SlicesAre(1, 2));
    // Stored twice: created, then replaced (a write sent again after a
    // connection was cut answers 409 and stores nothing).
    EXPECT_EQ(api_.stored_slice_names().size() - stored, 2u);
    const std::vector<ApiServerStub::Request> probes = Probes(api_, requests);
    ASSERT_EQ(probes.size(), 3u);
    for (const ApiServerStub::Request& p : probes) EXPECT_TRUE(p.dry_run);
    // The request after each failure waited the backoff (0.8 * 20 ms).
    EXPECT_GE(probes[1].at - probes[0].at, std::chrono::milliseconds(15));
    EXPECT_GE(probes[2].at - probes[1].at, std::chrono::milliseconds(15));
    EXPECT_EQ(Count(log, "cannot tell whether the API server keeps device taints"), 1u) << log;
    EXPECT_NE(log.find("asking again"), std::string::npos) << log;
    EXPECT_NE(log.find(std::to_string(code)), std::string::npos) << log;
    if (code == 403) {
      EXPECT_NE(log.find("the API server's authorization refused it"), std::string::npos) << log;
    }
    EXPECT_EQ(Count(log, "ResourceSlices: the API server keeps device taints"), 1u) << log;
  }
}

// The taint probe refused 403 for longer than forbidden_for_good (50 ms
// here): logged once more, then naming the role (its first warning said
// only that the server's authorization refused it, and was never repeated).
TEST_F(SlicePublisherTest, AFeatureProbeRefusedForLongNamesTheClusterRole) {
  probe_taints_ = true;
  api_.ServeDeviceTaints(true);
  forbidden_for_good_ = std::chrono::milliseconds(50);
  api_.FailNextSliceRequests("dryRun create", 403, 1000);
  ::testing::internal::CaptureStderr();
  Start(Slices(1));
  const bool asked = WaitFor([&] { return Probes(api_, 0).size() >= 5; });
  publisher_->Stop();
  api_.ClearQueuedFailures();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(asked) << log;
  ExpectTheRoleNamedLater(log, "create");
  EXPECT_EQ(Count(log, "cannot tell whether the API server keeps device taints"), 2u) << log;
}

// Consumable capacity asked in the same dry run: a server with the
// DRAConsumableCapacity gate off (1.34) drops it, one with it on keeps it,
// and one that refuses the shared device as invalid is taken at its word;
// each is asked once, stores nothing, and says what it means for
// time-sliced devices.
TEST_F(SlicePublisherTest, TheFeatureProbeTellsWhetherTheServerKeepsConsumableCapacity) {
  probe_sharing_ = true;
  struct Case {
    const char* name;
    bool taints;  // asked too
    bool served;
    int refusal;  // 0: none
    const char* logged;
  };
  for (const Case& c :
       {Case{"dropped", true, false, 0, "the API server drops consumable capacity"},
        Case{"kept", true, true, 0, "the API server keeps consumable capacity"},
        Case{"refused", false, true, 422, "the API server refuses a slice with a shared device"}}) {
    SCOPED_TRACE(c.name);
    node_ = std::string("node-") + c.name;
    api_.AddNode(node_);
    probe_taints_ = c.taints;
    api_.ServeConsumableCapacity(c.served);
    if (c.refusal != 0) api_.FailNextSliceRequests("dryRun create", c.refusal, 1);
    const size_t requests = api_.requests().size();
    std::atomic<int> shared{-1};
    ::testing::internal::CaptureStderr();
    Start([&shared, this](const SliceContext& context) {
      shared = context.consumable_capacity ? 1 : 0;
      return Slices(1, node_)(context);
    });
    const bool synced = WaitFor([&] { return publisher_->stats().in_sync.load(); });
    publisher_->Stop();
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(synced) << log;
    EXPECT_EQ(shared, c.served && c.refusal == 0 ? 1 : 0);
    EXPECT_EQ(Probes(api_, requests).size(), 1u);
    EXPECT_EQ(Count(log, c.logged), 1u) << log;
    EXPECT_EQ(api_.Slices(node_).size(), 1u);
    EXPECT_EQ(api_.Slices(node_)[0].find("probe"), std::string::npos);
  }
}

// A clear answer is kept: a server that keeps taints, one that drops them,
// and one that refuses the probe as invalid (422: a slice with a taint is
// not one it takes, and asking again gets the same) are each asked once,
// however many times everything is listed again after a failure.
TEST_F(SlicePublisherTest, AClearFeatureProbeAnswerIsNotAskedAgain) {
  probe_taints_ = true;
  struct Case {
    const char* name;
    bool served;
    int refusal;  // 0: none
    bool kept;
    const char* logged;
    size_t probes;  // an invalid answer with a None taint is asked again without
  };
  for (const Case& c :
       {Case{"kept", true, 0, true, "ResourceSlices: the API server keeps device taints", 1},
        Case{"dropped", false, 0, false, "ResourceSlices: the API server drops device taints", 1},
        Case{"invalid", true, 422, false, "the API server refuses a slice with a device taint",
             2}}) {
    SCOPED_TRACE(c.name);
    node_ = std::string("node-") + c.name;
    api_.AddNode(node_);
    api_.ServeDeviceTaints(c.served);
    api_.ServeNoneTaintEffect(true);
    if (c.refusal != 0) api_.FailNextSliceRequests("dryRun create", c.refusal, 2);
    api_.FailNextSliceRequests("watch", 500, 3);
    const size_t requests = api_.requests().size();
    std::atomic<int> asked{-1};
    ::testing::internal::CaptureStderr();
    Start([&asked, this](const SliceContext& context) {
      asked = context.device_taints ? 1 : 0;
      return Slices(1, node_)(context);
    });
    // Three watches refused: each lists everything again after a backoff.
    // The fourth seen by the server too before the stop: one still on its
    // way would take a refusal queued for the next case.
    const bool cycled = WaitFor([&] {
      const std::vector<ApiServerStub::Request> log = api_.requests();
      return publisher_->stats().lists >= 4 &&
             std::count_if(log.begin() + requests, log.end(), [](const ApiServerStub::Request& r) {
               return r.call == "watch resourceslices";
             }) >= 4;
    });
    publisher_->Stop();
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(cycled) << log;
    EXPECT_EQ(asked, c.kept ? 1 : 0);
    EXPECT_EQ(Probes(api_, requests).size(), c.probes);
    EXPECT_EQ(Count(log, c.logged), 1u) << log;
    EXPECT_EQ(log.find("asking again"), std::string::npos) << log;
  }
}

// A change of the builder's input that leaves the slices as they were (an
// unhealthy device's reason where taints are dropped, so the device is not
// in them) publishes nothing; where the reason is the taint's value, the
// change is one write under the next generation.
TEST_F(SlicePublisherTest, AReasonChangeIsANewGenerationOnlyWhereTheSlicesShowIt) {
  probe_taints_ = true;
  for (bool served : {false, true}) {
    SCOPED_TRACE(served ? "taints kept" : "taints dropped");
    node_ = served ? "node-kept" : "node-dropped";
    api_.AddNode(node_);
    api_.ServeDeviceTaints(served);
    Start(OneUnhealthy("XID-79", node_));
    ASSERT_TRUE(SlicesAre(1, 1));
    ASSERT_EQ(Gpu1(api_, node_), served ? "XID-79" : "absent");
    ASSERT_TRUE(WaitFor([&] { return publisher_->stats().watches >= 1; }));
    const size_t stored = api_.stored_slice_names().size();
    const uint64_t watches = publisher_->stats().watches;
    publisher_->SetDesired(OneUnhealthy("XID-48", node_));
    // The change ends the watch; the next one opens once it is handled.
    ASSERT_TRUE(WaitFor([&] {
      return publisher_->stats().watches > watches && publisher_->stats().in_sync.load();
    }));
    EXPECT_EQ(Gpu1(api_, node_), served ? "XID-48" : "absent");
    EXPECT_EQ(api_.stored_slice_names().size() - stored, served ? 1u : 0u);
    EXPECT_TRUE(SlicesAre(1, served ? 2 : 1));
    EXPECT_EQ(publisher_->stats().generation, served ? 2 : 1);
    publisher_->Stop();
  }
}

}  // namespace
}  // namespace gpu_agent::dra
