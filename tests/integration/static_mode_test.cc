// Static mode end to end: the real binary keeps nvidia.com/gpu in a Node's
// capacity on the API server stand-in, with the NVML stand-in as the GPUs.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include "api_server_stub.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kGpu = "nvidia.com/gpu";

class StaticModeTest : public ::testing::Test {
 protected:
  void Start(ApiServerStub& api, std::vector<std::string> extra = {},
             std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {BinaryPath(),
                                     "run",
                                     "--mode",
                                     "static",
                                     "--node-name",
                                     "gpu-node-1",
                                     "--health-recovery-period",
                                     "300ms"};
    if (std::find(extra.begin(), extra.end(), "--server") == extra.end()) {
      args.push_back("--proxy=" + api.url());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    auto e = FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml"));
    e["FAKE_NVML_CONTROL"] = dir_.Join("nvml.ctl");
    for (auto& [k, v] : env) e[k] = v;
    agent_ = std::make_unique<Subprocess>(args, e);
  }
  bool CapacityIs(ApiServerStub& api, const std::string& v,
                  std::chrono::milliseconds t = std::chrono::seconds(10)) {
    return WaitFor([&] { return api.Capacity("gpu-node-1", kGpu) == v; }, t);
  }
  std::string Log() { return agent_ ? agent_->Stderr() : ""; }
  // The capacity PATCHes (JSON patches), apart from those of the GpuHealthy
  // condition (strategic merge patches) that a GPU out at start also causes.
  // The first capacity PATCH (a JSON patch), apart from the GpuHealthy
  // condition's (a strategic merge patch), which a GPU out at start causes
  // too and which may make the reconciler re-read and patch again.
  static std::string FirstCapacityPatch(ApiServerStub& api) {
    const std::vector<std::string> types = api.patch_content_types();
    const std::vector<std::string> bodies = api.patch_bodies();
    for (size_t i = 0; i < types.size() && i < bodies.size(); ++i) {
      if (types[i].rfind("application/json-patch+json", 0) == 0) return bodies[i];
    }
    return "";
  }

  ApiServerStub& MakeApi(std::string cert = "", std::string key = "") {
    api_ = std::make_unique<ApiServerStub>(cert, key);
    return *api_;
  }

  TempDir dir_;
  std::unique_ptr<ApiServerStub> api_;  // outlives the agent: it goes first
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(StaticModeTest, SetsCapacityAndAllocatable) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  EXPECT_EQ(api.Allocatable("gpu-node-1", kGpu), "8");
  EXPECT_EQ(api.patch_content_types().at(0), "application/json-patch+json");
}

TEST_F(StaticModeTest, KubeletZeroingIsRepairedFastAndSteadyStateSendsNothing) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  const int patches = api.patch_count();
  // Steady: nothing changes, so nothing is sent.
  EXPECT_FALSE(
      WaitFor([&] { return api.patch_count() != patches; }, std::chrono::milliseconds(1500)));
  const auto t0 = std::chrono::steady_clock::now();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");  // node re-registration
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
  const auto repair = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(repair, std::chrono::seconds(1));
  EXPECT_EQ(api.patch_count(), patches + 1);
  std::printf("drift repaired in %.1f ms\n",
              std::chrono::duration<double, std::milli>(repair).count());
}

TEST_F(StaticModeTest, GpuHealthChangesTheValue) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 2 94"));  // contained ECC: app restarts
  ASSERT_TRUE(CapacityIs(api, "7")) << Log();
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();  // after the quiet period
  // Off the bus needs a reset: back only once the GPU is.
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 2 79"));
  ASSERT_TRUE(CapacityIs(api, "7")) << Log();
  EXPECT_FALSE(CapacityIs(api, "8", std::chrono::seconds(1))) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "reset 2"));
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
}

// A polled check at severity unhealthy (the driver's recovery action, by
// default) counts its GPU out of the Node's capacity until it is reset.
TEST_F(StaticModeTest, AnUnhealthyCheckChangesTheValue) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api, {"--health-poll-interval", "1s"});
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "set 2 recoveryAction 2"));
  ASSERT_TRUE(CapacityIs(api, "7")) << Log();
  EXPECT_FALSE(CapacityIs(api, "8", std::chrono::seconds(2))) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "reset 2"));
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
}

// Each GPU health transition is an Event on the Node, and the Node's
// GpuHealthy condition names what fails while anything does.
TEST_F(StaticModeTest, GpuHealthTransitionsAreEventsOnTheNodeAndItsCondition) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.SetCondition("gpu-node-1", "Ready", "True");
  Start(api, {"--health-poll-interval", "1s"});
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 2 79"));
  ASSERT_TRUE(WaitFor([&] { return api.events().size() == 1; })) << Log();
  EXPECT_NE(api.events()[0].find("\"reason\":\"GpuUnhealthy\""), std::string::npos)
      << api.events()[0];
  EXPECT_NE(api.events()[0].find("GPU 2 (GPU-"), std::string::npos) << api.events()[0];
  EXPECT_NE(api.events()[0].find("xid unhealthy: XID 79"), std::string::npos) << api.events()[0];
  ASSERT_TRUE(WaitFor([&] {
    return api.Condition("gpu-node-1", "GpuHealthy").find("\"status\":\"False\"") !=
           std::string::npos;
  })) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "set 5 pcieWidth 8"));  // degraded
  ASSERT_TRUE(WaitFor([&] { return api.events().size() == 2; })) << Log();
  EXPECT_NE(api.events()[1].find("\"reason\":\"GpuDegraded\""), std::string::npos);
  ASSERT_TRUE(WaitFor([&] {
    return api.Condition("gpu-node-1", "GpuHealthy").find("pcieWidth degraded (x8 of x16)") !=
           std::string::npos;
  })) << api.Condition("gpu-node-1", "GpuHealthy");
  EXPECT_TRUE(CapacityIs(api, "7")) << "degraded stays allocatable";
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "reset 2"));
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "set 5 pcieWidth 16"));
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] {
    return api.Condition("gpu-node-1", "GpuHealthy").find("\"status\":\"True\"") !=
           std::string::npos;
  })) << api.Condition("gpu-node-1", "GpuHealthy");
  // Both came back within the minute their event was sent in: at most one
  // event per GPU and check a minute, and a flap that ends where it began
  // tells nothing more (the condition already says so).
  EXPECT_FALSE(WaitFor([&] { return api.events().size() > 2; }, std::chrono::milliseconds(500)));
  EXPECT_NE(api.Condition("gpu-node-1", "Ready"), "") << "the kubelet's condition stays";
}

// A server that refuses events: said once, capacity kept all the same.
TEST_F(StaticModeTest, AServerRefusingEventsIsSaidOnceAndCapacityGoesOn) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.Forbid("create events");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 2 79"));
  ASSERT_TRUE(CapacityIs(api, "7")) << Log();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 3 79"));
  ASSERT_TRUE(CapacityIs(api, "6")) << Log();
  ASSERT_TRUE(agent_->WaitForStderr("did not take a GPU health event")) << Log();
  ASSERT_TRUE(WaitFor([&] {
    return api.Condition("gpu-node-1", "GpuHealthy").find("GPU 3") != std::string::npos;
  })) << Log();
  const std::string log = Log();
  EXPECT_EQ(log.find("did not take a GPU health event"),
            log.rfind("did not take a GPU health event"))
      << "said more than once:\n"
      << log;
  EXPECT_TRUE(agent_->Running());
}

// Device health has one source, the health watcher, which reports what is
// out at start before the first PATCH: a GPU NVML calls lost at discovery
// is counted out from it, with XID health checks off too.
TEST_F(StaticModeTest, GpuLostAtDiscoveryIsOutFromTheFirstPatchWithHealthChecksOff) {
  std::string text = ReadFile(FixturePath("8-gpu-pcie.yaml"));
  const size_t at = text.find("  - uuid: ");
  ASSERT_NE(at, std::string::npos);
  const size_t eol = text.find('\n', at);
  text.insert(eol + 1, "    fail:\n      nvmlDeviceGetMinorNumber: 15\n");
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api, {},
        {{"FAKE_NVML_FIXTURE", dir_.Write("lost.yaml", text)}, {"DP_DISABLE_HEALTHCHECKS", "all"}});
  ASSERT_TRUE(CapacityIs(api, "7")) << Log();
  EXPECT_NE(FirstCapacityPatch(api).find("\"value\":\"7\""), std::string::npos)
      << "the first PATCH counted the lost GPU in: " << FirstCapacityPatch(api) << "\n"
      << Log();
}

// A GPU the driver still asks to be reset when the agent starts is out from
// the first PATCH (the watcher, which sees it, now reports before the
// reconciler starts; it used to start after, so the first PATCH had it in).
TEST_F(StaticModeTest, GpuWithAResetPendingAtStartIsOutFromTheFirstPatch) {
  std::string text = ReadFile(FixturePath("8-gpu-pcie.yaml"));
  const size_t at = text.find("  - uuid: ");
  ASSERT_NE(at, std::string::npos);
  text.insert(text.find('\n', at) + 1, "    resetPending: true\n");
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api, {}, {{"FAKE_NVML_FIXTURE", dir_.Write("pending.yaml", text)}});
  ASSERT_TRUE(CapacityIs(api, "7")) << Log();
  EXPECT_NE(FirstCapacityPatch(api).find("\"value\":\"7\""), std::string::npos)
      << "the first PATCH counted the GPU in: " << FirstCapacityPatch(api) << "\n"
      << Log();
  EXPECT_NE(Log().find("at start:"), std::string::npos) << Log();
}

// The Node deleted (a DELETED watch event; GETs would 404) and registered again
// by its kubelet without the GPU entry: the agent writes it back.
TEST_F(StaticModeTest, NodeDeletedAndRecreatedGetsItsCapacityBack) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  api.DeleteNode("gpu-node-1");
  EXPECT_FALSE(api.Capacity("gpu-node-1", kGpu).has_value());
  ASSERT_TRUE(agent_->WaitForStderr("the node was deleted; waiting for it to come back")) << Log();
  api.AddNode("gpu-node-1");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(15))) << Log();
  EXPECT_EQ(api.Allocatable("gpu-node-1", kGpu), "8");
  EXPECT_TRUE(agent_->Running());
}

TEST_F(StaticModeTest, FightIsReportedOnceNotFoughtForever) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; }));
  for (int i = 0; i < 3; ++i) {
    api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
    if (i < 2) {
      ASSERT_TRUE(CapacityIs(api, "8")) << Log();
    }
  }
  ASSERT_TRUE(agent_->WaitForStderr("another writer keeps resetting this resource")) << Log();
  const int patches = api.patch_count();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  EXPECT_FALSE(
      WaitFor([&] { return api.patch_count() != patches; }, std::chrono::milliseconds(1000)));
  const std::string log = Log();
  EXPECT_EQ(log.find("another writer"), log.rfind("another writer"));  // said once
  EXPECT_NE(log.find("device plugin"), std::string::npos);
}

TEST_F(StaticModeTest, ApiErrorsBackOffAndConverge) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.FailNextPatches(500, 2);
  api.FailNextPatches(429, 1);
  api.FailNextPatches(409, 1);
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(20))) << Log();
  EXPECT_NE(Log().find("will retry"), std::string::npos);
  EXPECT_GE(api.patch_count(), 5);
}

TEST_F(StaticModeTest, DroppedConnectionsAndAnExpiredWatchConverge) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.DropNextGets(2);
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(20))) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; }));
  // The server ends the watch and has compacted the history: the agent
  // gets 410 Gone, reads the Node again and watches from there. (Counting
  // watches raced: one already on its way when EndWatches came took the 410
  // itself, and the count then rose by one, not two.)
  const int expired = api.expired_count();
  api.EndWatches(/*gone=*/true);
  ASSERT_TRUE(WaitFor([&] { return api.expired_count() > expired; }, std::chrono::seconds(20)))
      << Log();
  // Whatever the zeroing below meets (the list, or the new watch, which
  // starts from the list's version), it is seen and repaired.
  ASSERT_TRUE(WaitFor([&] { return api.open_watches() > 0; }, std::chrono::seconds(20))) << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
}

// After an API server restart the watch cache starts at the current
// revision, so every older version is gone (410). The agent must list once
// and watch from the list's version, not loop on the Node's own old version.
TEST_F(StaticModeTest, ApiServerRestartCostsAFewRequestsNotALoop) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.TouchOtherObjects(50);
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  api.TouchOtherObjects(50);  // the Node's version now trails the revision
  const int lists = api.list_count();
  const auto t0 = std::chrono::steady_clock::now();
  api.Restart();
  // The broken watch is opened again within the reconnect spread (10 s).
  ASSERT_TRUE(WaitFor([&] { return api.list_count() > lists; }, std::chrono::seconds(20))) << Log();
  EXPECT_FALSE(WaitFor([&] { return api.RequestsSince(t0) > 4; }, std::chrono::seconds(30)))
      << "requests in the 30 s after a restart: " << api.RequestsSince(t0) << "\n"
      << Log();
  EXPECT_EQ(api.Capacity("gpu-node-1", kGpu), "8");
  EXPECT_EQ(Log().find("cannot read the node"), std::string::npos) << Log();
  EXPECT_EQ(Log().find("could not reconcile"), std::string::npos) << Log();
  // And the watch it settled on still works.
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
}

// etcd restored from a backup the documented way (revisions bumped, the
// older ones compacted, every kube-apiserver restarted): the Node is back
// at the backup's content and version, older than the agent's own last
// write. The agent's watch is answered 410, it lists, and the listed Node
// (stale by version, wrong by content) makes it read the Node again and
// repair it, well before the resync timer (an hour here) would.
TEST_F(StaticModeTest, EtcdRestoredFromABackupIsRepairedWithoutWaitingForTheResync) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api, {"--resync-interval", "1h"});
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  api.TakeBackup();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 2 79"));
  ASSERT_TRUE(CapacityIs(api, "7")) << Log();
  api.RestoreBackup(/*bump=*/1000);
  ASSERT_EQ(api.Capacity("gpu-node-1", kGpu), "8");
  // The broken watch is opened again within the reconnect spread (10 s),
  // answered 410, and lists. (A request of the agent's cut off by the
  // restart may be sent again first and repair it sooner: either way, not
  // the resync timer.)
  ASSERT_TRUE(CapacityIs(api, "7", std::chrono::seconds(20))) << Log();
  EXPECT_EQ(Log().find("could not reconcile"), std::string::npos) << Log();
}

// The first request after a restart goes over the kept-alive connection
// the old server process had: it is cut off unanswered. The agent sends it
// again at once on a new connection: no warning, no backoff.
TEST_F(StaticModeTest, RequestCutOffByARestartIsSentAgainAtOnce) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  // The reconciler's requests alone: GPU health events keep a connection
  // of their own, which a restart cuts off too.
  Start(api, {"--health-node-events", "off"});
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");  // a PATCH: the connection is fresh
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  api.Restart();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 2 79"));  // a GPU lost: re-read and patch
  ASSERT_TRUE(CapacityIs(api, "7", std::chrono::seconds(5))) << Log();
  // No backoff: the old way waited 0.5 s (+-20 %) after a warning. The log
  // is the sure sign; the bound is loose for a loaded machine.
  EXPECT_EQ(api.cut_count(), 1) << Log();
  EXPECT_EQ(Log().find("could not reconcile"), std::string::npos) << Log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << Log();
}

// Other Nodes' changes push this quiet Node's version out of the watch
// cache. When its watch ends, the next one from the old version is answered
// 410: list again and carry on, once.
TEST_F(StaticModeTest, QuietNodeWhileOthersChurnPastTheWatchWindow) {
  ApiServerStub& api = MakeApi();
  api.SetWatchCacheSize(10);
  api.AddNode("gpu-node-1");
  api.AddNode("busy-node");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  for (int i = 0; i < 50; ++i) api.KubeletSetsCapacity("busy-node", "cpu", std::to_string(i));
  const auto t0 = std::chrono::steady_clock::now();
  api.EndWatches(/*gone=*/false);  // as the watch's timeout does
  ASSERT_TRUE(WaitFor([&] { return api.expired_count() >= 1; })) << Log();
  EXPECT_FALSE(WaitFor([&] { return api.RequestsSince(t0) > 4; }, std::chrono::seconds(30)))
      << "requests in the 30 s after the watch ended: " << api.RequestsSince(t0) << "\n"
      << Log();
  EXPECT_EQ(api.expired_count(), 1);
  EXPECT_NE(Log().find("410 Gone"), std::string::npos) << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
}

// A server that answers 410 to every watch (a broken proxy, say) gets a
// backed-off list and watch, not a loop, and one log line; when it mends,
// the agent is back on a watch.
TEST_F(StaticModeTest, RepeatedExpiryBacksOff) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  api.ExpireEveryWatch(true);
  const auto t0 = std::chrono::steady_clock::now();
  api.EndWatches(/*gone=*/false);
  // Lists again at once after the first 410, then waits 0.5, 1, 2, 4, 8 s
  // (each with jitter 0.8-1.2) between list-and-watch pairs.
  EXPECT_FALSE(WaitFor([&] { return api.RequestsSince(t0) > 14; }, std::chrono::seconds(12)))
      << "requests in 12 s of 410s: " << api.RequestsSince(t0) << "\n"
      << Log();
  EXPECT_GE(api.expired_count(), 4) << Log();
  const std::string log = Log();
  EXPECT_NE(log.find("410 Gone"), std::string::npos) << log;
  EXPECT_EQ(log.find("410 Gone"), log.rfind("410 Gone")) << "logged once per run\n" << log;
  EXPECT_EQ(api.Capacity("gpu-node-1", kGpu), "8");
  api.ExpireEveryWatch(false);
  const int watches = api.watch_count();
  const int expired = api.expired_count();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() > watches; }, std::chrono::seconds(15)))
      << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
  EXPECT_EQ(api.expired_count(), expired);
}

// A server that ends every watch at once, with nothing in it, gets watches
// that back off, not a loop.
TEST_F(StaticModeTest, WatchesEndingAtOnceBackOff) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  api.EndEveryWatchAtOnce(true);
  const auto t0 = std::chrono::steady_clock::now();
  api.EndWatches(/*gone=*/false);
  // Waits of 0.5, 1, 2, 4 s (+-20 %) between watches: at most 5 in 6 s.
  EXPECT_FALSE(WaitFor([&] { return api.RequestsSince(t0) > 5; }, std::chrono::seconds(6)))
      << "requests in 6 s: " << api.RequestsSince(t0) << "\n"
      << Log();
  EXPECT_GE(api.RequestsSince(t0), 3) << Log();
  EXPECT_NE(Log().find("node watch ended at once"), std::string::npos) << Log();
  api.EndEveryWatchAtOnce(false);
  const int watches = api.watch_count();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() > watches; }, std::chrono::seconds(15)))
      << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
}

// An ERROR event other than 410 (the server failed) ends the watch; the
// agent says so, lists again after a backoff and carries on.
TEST_F(StaticModeTest, WatchErrorEventIsNamedAndRecovered) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  const int lists = api.list_count();
  api.FailNextWatch(500);
  api.EndWatches(/*gone=*/false);
  ASSERT_TRUE(agent_->WaitForStderr("node watch ended with an error")) << Log();
  EXPECT_NE(Log().find("error event 500"), std::string::npos) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.list_count() > lists; })) << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
}

// SIGTERM while the API server sits on a LIST: the agent does not wait for
// the request's timeout to exit.
TEST_F(StaticModeTest, SigtermDuringAHungListExitsPromptly) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.HangLists(true);
  Start(api);
  ASSERT_TRUE(WaitFor([&] { return api.list_count() >= 1; })) << Log();
  const auto t0 = std::chrono::steady_clock::now();
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(std::chrono::seconds(10)), 0) << Log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << Log();
  api.HangLists(false);
}

// Bookmarks keep a quiet Node's watch version current: renewing the watch
// after others churned past the window costs no 410 and no LIST.
TEST_F(StaticModeTest, BookmarksKeepTheWatchCurrent) {
  ApiServerStub& api = MakeApi();
  api.SetWatchCacheSize(10);
  api.AddNode("gpu-node-1");
  api.AddNode("busy-node");
  Start(api, {"--watch-timeout", "3s"});
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  // Churn right after a renewal: that watch's bookmark is still to come.
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 2; }, std::chrono::seconds(20))) << Log();
  for (int i = 0; i < 50; ++i) api.KubeletSetsCapacity("busy-node", "cpu", std::to_string(i));
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 4; }, std::chrono::seconds(20))) << Log();
  EXPECT_EQ(api.expired_count(), 0) << Log();
  EXPECT_EQ(api.list_count(), 1) << Log();
  // Each watch asked for a timeout between the setting and twice it.
  for (long t : api.watch_timeouts()) {
    EXPECT_GE(t, 3);
    EXPECT_LT(t, 6);
  }
}

// An older ClusterRole without `list`: a watch with no version, which starts
// with the current Node, stands in; the agent says what to grant.
TEST_F(StaticModeTest, WithoutListPermissionItWatchesFromNow) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.Forbid("list nodes");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  EXPECT_NE(Log().find("grant nodes list"), std::string::npos) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() >= 1; })) << Log();
  api.KubeletSetsCapacity("gpu-node-1", kGpu, "0");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(5))) << Log();
}

TEST_F(StaticModeTest, ForbiddenAndUnknownNodeAreNamedAndRetried) {
  ApiServerStub& api = MakeApi();
  api.AddNode("other-node");
  api.AllowToken("t", /*may_patch=*/true);
  const std::string token = dir_.Write("token", "t");
  Start(api, {"--server", api.url(), "--token-file", token});
  ASSERT_TRUE(agent_->WaitForStderr("node \\\"gpu-node-1\\\" not found")) << Log();
  EXPECT_TRUE(agent_->Running());
  api.AddNode("gpu-node-1");
  ASSERT_TRUE(CapacityIs(api, "8", std::chrono::seconds(20))) << Log();
}

TEST_F(StaticModeTest, RotatedTokenRecovers) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  api.AllowToken("new");
  const std::string token = dir_.Write("token", "old");
  api.OnUnauthorized([&] { dir_.Write("token", "new"); });
  Start(api, {"--server", api.url(), "--token-file", token});
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
}

TEST_F(StaticModeTest, SigtermLeavesTheValueRemoveOnExitRemovesIt) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Log();
  EXPECT_EQ(api.Capacity("gpu-node-1", kGpu), "8");
  Start(api, {"--remove-on-exit"});
  ASSERT_TRUE(agent_->WaitForStderr("keeping node capacity")) << Log();
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Log();
  EXPECT_EQ(api.Capacity("gpu-node-1", kGpu), std::nullopt);
  EXPECT_EQ(api.Allocatable("gpu-node-1", kGpu), std::nullopt);
}

TEST_F(StaticModeTest, NeedsANodeName) {
  RunResult r =
      RunAgent({"run", "--mode", "static", "--proxy"}, FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("static mode needs this node's name"), std::string::npos) << r.err;
}

TEST_F(StaticModeTest, InClusterConnectionUsesTheServiceAccount) {
  TempDir pki_dir;
  TestPki pki = MakeTestPki(pki_dir.path());
  ApiServerStub& api = MakeApi(pki.cert, pki.key);
  api.AddNode("gpu-node-1");
  api.AllowToken("sa-token");
  TempDir sa;
  sa.Write("token", "sa-token\n");
  std::filesystem::copy_file(pki.ca, sa.Join("ca.crt"));
  std::vector<std::string> args = {BinaryPath(), "run",         "--mode",
                                   "static",     "--node-name", "gpu-node-1"};
  auto e = FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml"));
  e["KUBERNETES_SERVICE_HOST"] = "localhost";
  e["KUBERNETES_SERVICE_PORT"] = std::to_string(api.port());
  e["GPU_AGENT_SERVICE_ACCOUNT_DIR"] = sa.path();
  agent_ = std::make_unique<Subprocess>(args, e);
  ASSERT_TRUE(CapacityIs(api, "8")) << Log();
  EXPECT_NE(Log().find("in-cluster API server https://localhost:"), std::string::npos);
}

TEST_F(StaticModeTest, MixedMigKeepsTheSameResourcesPluginModeWouldAdvertise) {
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api, {"--mig-strategy", "mixed"}, {{"FAKE_NVML_FIXTURE", FixturePath("2-gpu-mig.yaml")}});
  auto is = [&](const char* resource, const char* v) {
    return WaitFor([&] { return api.Capacity("gpu-node-1", resource) == v; });
  };
  ASSERT_TRUE(is("nvidia.com/mig-1g.10gb", "2")) << Log();
  ASSERT_TRUE(is("nvidia.com/mig-2g.20gb", "1")) << Log();
  ASSERT_TRUE(is(kGpu, "1")) << Log();
  EXPECT_EQ(api.Allocatable("gpu-node-1", "nvidia.com/mig-1g.10gb"), "2");
  // An instance-scoped XID takes one MIG device out, then it comes back.
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 0 94 2 0"));
  ASSERT_TRUE(is("nvidia.com/mig-1g.10gb", "1")) << Log();
  EXPECT_EQ(api.Capacity("gpu-node-1", "nvidia.com/mig-2g.20gb"), "1");
  ASSERT_TRUE(is("nvidia.com/mig-1g.10gb", "2")) << Log();
}

TEST_F(StaticModeTest, SelectionAndSharedSubsetMatchPluginMode) {
  const std::string config = dir_.Write("c.yaml", R"(version: v1
devices:
  exclude: [index:0]
sharing:
  timeSlicing:
    honor: [devices, rename]
    resources:
    - name: nvidia.com/gpu
      replicas: 4
      devices: [1, 2]
      rename: nvidia.com/gpu.shared
)");
  ApiServerStub& api = MakeApi();
  api.AddNode("gpu-node-1");
  Start(api, {"--config", config});
  ASSERT_TRUE(CapacityIs(api, "5")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api.Capacity("gpu-node-1", "nvidia.com/gpu.shared") == "8"; }))
      << Log();
}

}  // namespace
}  // namespace gpu_agent::testing
