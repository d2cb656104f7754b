// Moving a node between plugin and DRA mode with one label, end to end: the
// real binary on the NVML stand-in (8 GPUs), the device-plugin kubelet
// stand-in (registration, ListAndWatch, Allocate, PodResources), the DRA
// kubelet stand-in (registration, prepare, unprepare) and the API server
// stand-in (the node's config label, ResourceClaims, ResourceSlices). No
// GPU is offered by one side while the other still has it in a pod's hands.
#include <gtest/gtest.h>
#include <httplib.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "api_server_stub.h"
#include "dra_kubelet.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"
#include "support/rbac_rules.h"

namespace gpu_agent::testing {
namespace {

constexpr char kGpu[] = "nvidia.com/gpu";
constexpr char kLabel[] = "nvidia.com/device-plugin.config";
constexpr char kNode[] = "gpu-node-1";
constexpr char kDriver[] = "gpu.gpu-agent.github.io";
constexpr char kUuid0[] = "GPU-0eeb03b7-15a7-5ad5-8f6f-b0379ccc67f0";
constexpr char kUuid1[] = "GPU-29d1a1d2-61cc-53e1-a192-bc8f567efea0";
constexpr char kDevice0[] = "gpu-0000-06-00-0";  // GPU 0 as DRA names it
constexpr char kDevice1[] = "gpu-0000-07-00-0";

std::string ClaimJson(const std::string& name, const std::string& uid, const std::string& device) {
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")" +
         name + R"(","namespace":"team","uid":")" + uid +
         R"("},"spec":{"devices":{"requests":[{"name":"gpu"}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":")" +
         kDriver + R"(","pool":")" + kNode + R"(","device":")" + device + R"("}]}}}})";
}

// How many times `what` is in `text`.
size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ModeHandoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteFakeDriverRoot(dir_.Join("driver"), "550.54.15"));
    WriteFakeDevRoot(dir_.Join("devroot"), {0, 1, 2, 3, 4, 5, 6, 7}, {}, false);
    ASSERT_TRUE(WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir_.Join("sys")));
    ::mkdir(dir_.Join("registry").c_str(), 0755);
    ::mkdir(dir_.Join("plugins").c_str(), 0755);
    dir_.Write("configs/plugin", "version: v1\nmode: plugin\n");
    dir_.Write("configs/dra", "version: v1\nmode: dra\n");
    dir_.Write("configs/static", "version: v1\nmode: static\n");
    api_.ServeResourceVersions({"v1"});
    api_.AddNode(kNode);
    ASSERT_TRUE(sim_.Start());
    ASSERT_TRUE(sim_.ServePodResources(PodResourcesSocket()));
    DraKubelet::Options o;
    o.registry_dir = dir_.Join("registry");
    dra_ = std::make_unique<DraKubelet>(o);
    ASSERT_TRUE(dra_->Start());
  }

  std::string PodResourcesSocket() { return dir_.Join("pod-resources.sock"); }

  void StartAgent() {
    std::vector<std::string> args = {BinaryPath(),
                                     "run",
                                     "--node-name",
                                     kNode,
                                     "--proxy=" + api_.url(),
                                     "--node-config-dir",
                                     dir_.Join("configs"),
                                     "--node-config-default",
                                     "plugin",
                                     "--kubelet-socket",
                                     sim_.socket(),
                                     "--pod-resources-socket",
                                     PodResourcesSocket(),
                                     "--dra-registry-dir",
                                     dir_.Join("registry"),
                                     "--dra-plugin-dir",
                                     dir_.Join("plugins"),
                                     "--cdi-spec-dir",
                                     dir_.Join("cdi"),
                                     "--nvidia-cdi-hook-path",
                                     "",
                                     "--nvidia-driver-root",
                                     dir_.Join("driver"),
                                     "--dev-root",
                                     dir_.Join("devroot"),
                                     "--sysfs-root",
                                     dir_.Join(sys_),
                                     "--proc-root",
                                     dir_.Join("proc"),
                                     "--metrics-address",
                                     "127.0.0.1:0"};
    agent_ = std::make_unique<Subprocess>(args, FakeNvmlEnv(FixturePath(fixture_)));
  }

  std::string Log() { return agent_ ? agent_->Stderr() : ""; }

  // The port of the agent's metrics server last started (it starts again
  // with each mode).
  std::string Get(const std::string& path) {
    constexpr const char* kText = "metrics endpoint listening address=127.0.0.1:";
    const std::string err = Log();
    const size_t at = err.rfind(kText);
    if (at == std::string::npos) return "";
    httplib::Client http("127.0.0.1", std::stoi(err.substr(at + std::strlen(kText))));
    auto r = http.Get(path);
    return r ? r->body : "";
  }

  // The agent's metrics server (the one the mode now running started)
  // answers `path` with `text` in it.
  bool Serves(const std::string& path, const std::string& text) {
    return WaitFor([&] { return Get(path).find(text) != std::string::npos; });
  }

  // The device names in the node's slices.
  std::set<std::string> Published() {
    std::set<std::string> out;
    for (const std::string& json : api_.Slices(kNode)) {
      rapidjson::Document d;
      d.Parse(json.c_str());
      for (const auto& dev : d["spec"]["devices"].GetArray()) out.insert(dev["name"].GetString());
    }
    return out;
  }
  bool PublishedCount(size_t n) {
    return WaitFor([&] { return Published().size() == n; }, std::chrono::seconds(15));
  }

  // Plugin mode serving 8 GPUs; pods ml/a and ml/b hold GPUs 0 and 1.
  void PluginModeWithTwoPods() {
    StartAgent();
    ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const auto& d) { return d.size() == 8; })) << Log();
    v1beta1::AllocateResponse r;
    ASSERT_TRUE(sim_.AdmitPod("ml", "a", "main", kGpu, {kUuid0}, &r).ok()) << Log();
    ASSERT_TRUE(sim_.AdmitPod("ml", "b", "main", kGpu, {kUuid1}, &r).ok()) << Log();
  }

  std::string PrepareError(const std::string& uid, const std::string& name) {
    std::map<std::string, dra::PrepareOutcome> out;
    const grpc::Status s = dra_->Prepare(kDriver, {{"team", uid, name}}, &out);
    if (!s.ok()) return "rpc: " + s.error_message();
    return out[uid].error;
  }

  // NodeUnprepareResources for one claim: what the plugin answered for it,
  // or the call's error. Tried again while the call fails, as the kubelet
  // does: after a switch back to plugin mode the DRA plugin registers anew,
  // and until it has, calls go to the endpoint it left.
  std::string UnprepareError(const std::string& uid, const std::string& name) {
    std::map<std::string, std::string> out;
    grpc::Status s;
    WaitFor(
        [&] {
          return (s = dra_->Unprepare(kDriver, {{"team", uid, name}}, &out)).ok();
        },
        std::chrono::seconds(15));
    if (!s.ok()) return "rpc: " + s.error_message();
    return out[uid];
  }

  bool HealthIs(const std::string& uuid, const std::string& health) {
    return sim_.WaitForDevices(kGpu, [&](const std::vector<v1beta1::Device>& ds) {
      for (const auto& d : ds) {
        if (d.id() == uuid) return d.health() == health;
      }
      return false;
    });
  }

  // The Node's GpuAgentMode condition reaches `reason`, its message holding
  // `text`.
  bool ConditionIs(const std::string& reason, const std::string& text) {
    return WaitFor([&] {
      const std::string c = api_.Condition(kNode, "GpuAgentMode");
      return c.find("\"reason\":\"" + reason + "\"") != std::string::npos &&
             c.find(text) != std::string::npos;
    });
  }

  bool DraRegistered(bool want) {
    return WaitFor([&] { return dra_->plugin(kDriver).has_value() == want; },
                   std::chrono::seconds(15));
  }

  std::string fixture_ = "8-gpu-nvlink.yaml";  // the NVML stand-in's
  std::string sys_ = "sys";                    // its sysfs, under dir_
  TempDir dir_;
  KubeletSimulator sim_{dir_.path()};
  std::unique_ptr<DraKubelet> dra_;
  ApiServerStub api_;  // outlives the agent
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(ModeHandoverTest, PluginToDraKeepsHeldGpusOutUntilTheirPodsEndAndBackAgain) {
  ASSERT_NO_FATAL_FAILURE(PluginModeWithTwoPods());
  api_.PutResourceClaim("team", "c0", ClaimJson("c0", "uid-c0", kDevice0));

  // Plugin to DRA: the device plugin goes, DRA comes, without GPUs 0 and 1.
  api_.SetLabel(kNode, kLabel, "dra");
  ASSERT_TRUE(DraRegistered(true)) << Log();
  ASSERT_TRUE(PublishedCount(6)) << Log();
  // The held GPUs were never in a slice: the first write made them as they are.
  EXPECT_EQ(api_.slice_writes(), 1);
  EXPECT_EQ(Published().count(kDevice0), 0u);
  EXPECT_EQ(Published().count(kDevice1), 0u);
  EXPECT_TRUE(WaitFor([&] { return sim_.Allocatable(kGpu) == 0; }))
      << "the kubelet lost the plugin";
  // The Node's allocatable is 0 at once, not at the kubelet's next status
  // sync, and before DRA's first slice: the scheduler sends nvidia.com/gpu
  // pods through DRA from then on, none to the plugin that is gone.
  EXPECT_EQ(api_.Allocatable(kNode, kGpu), "0") << api_.NodeJson(kNode) << Log();
  const std::string log = Log();
  const size_t released = log.find("allocatable of the device plugin's resources is 0");
  ASSERT_NE(released, std::string::npos) << log;
  EXPECT_LT(released, log.find("publishing ResourceSlices")) << log;
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("nvidia-gpu.sock"))) << Log();
  // A claim for a held GPU is refused, naming the pod that holds it.
  const std::string refused = PrepareError("uid-c0", "c0");
  EXPECT_NE(refused.find("held by device-plugin pod ml/a"), std::string::npos) << refused;
  EXPECT_TRUE(Serves("/readyz", "ok: handover from the device plugin: 2 GPU(s) held"))
      << Get("/readyz");
  EXPECT_TRUE(Serves("/metrics", "gpu_agent_handover_gpus_held{held_by=\"plugin\"} 2"))
      << Get("/metrics");
  EXPECT_TRUE(ConditionIs("MovingToDra", "2 GPU(s) still held by device-plugin pods: " +
                                             std::string(kUuid0) + " (device-plugin pod ml/a)"))
      << api_.Condition(kNode, "GpuAgentMode");

  // The pods end: every GPU is offered, and the claim prepares.
  sim_.EndPod("ml", "a");
  sim_.EndPod("ml", "b");
  ASSERT_TRUE(PublishedCount(8)) << Log();
  // Its own writes' late events are no one else's change to repair.
  EXPECT_TRUE(Serves("/metrics", "gpu_agent_dra_slice_repairs_total 0")) << Get("/metrics");
  EXPECT_EQ(PrepareError("uid-c0", "c0"), "") << Log();
  EXPECT_TRUE(agent_->WaitForStderr("handover from the device plugin done")) << Log();
  EXPECT_TRUE(ConditionIs("Dra", "every GPU is offered through DRA"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("plugins") + "/" + kDriver + "/handover"));

  // DRA to plugin: the slices go; GPU 0 is the claim's until it is
  // unprepared, and the DRA plugin stays registered until then.
  api_.SetLabel(kNode, kLabel, "plugin");
  ASSERT_TRUE(PublishedCount(0)) << Log();
  ASSERT_TRUE(HealthIs(kUuid0, "Unhealthy")) << Log();
  EXPECT_TRUE(HealthIs(kUuid1, "Healthy")) << Log();
  EXPECT_TRUE(DraRegistered(true)) << Log();
  EXPECT_TRUE(Serves("/readyz", "ok: handover from DRA: 1 GPU(s)")) << Get("/readyz");
  EXPECT_TRUE(ConditionIs("MovingToDevicePlugin", "(DRA claim team/c0)"))
      << api_.Condition(kNode, "GpuAgentMode");
  // No new claim is prepared on this node.
  api_.PutResourceClaim("team", "c1", ClaimJson("c1", "uid-c1", kDevice1));
  EXPECT_NE(PrepareError("uid-c1", "c1").find("moved from DRA to the device plugin"),
            std::string::npos);
  ASSERT_EQ(UnprepareError("uid-c0", "c0"), "") << Log();
  EXPECT_TRUE(HealthIs(kUuid0, "Healthy")) << Log();
  EXPECT_TRUE(DraRegistered(false)) << Log();
  EXPECT_TRUE(agent_->WaitForStderr("handover from DRA done")) << Log();
  EXPECT_TRUE(ConditionIs("DevicePlugin", "every GPU is served by the device plugin"));

  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Log();
  // What the move asked of the API server is what the node-config and
  // mode-handover components grant, and nothing more (discovery needs no
  // rule).
  std::set<std::string> granted = GrantedCalls("manifests/components/node-config/rbac.yaml");
  granted.merge(GrantedCalls("manifests/components/mode-handover/rbac.yaml"));
  std::set<std::string> calls = api_.calls();
  calls.erase("get resource.k8s.io");
  EXPECT_EQ(calls, granted);
}

// Time-slicing carries over: a node whose GPUs plugin mode advertises as 2
// replicas each moves to DRA with the same sharing section, and each GPU is
// published once, shared by 2 claims (the server keeps consumable
// capacity); the GPU a device-plugin pod holds one replica of stays out
// until the pod ends. Two claims share GPU 1 side by side. Back in plugin
// mode, both of GPU 1's replicas are Unhealthy until both claims are
// unprepared.
TEST_F(ModeHandoverTest, TimeSlicedGpusMoveToDraSharedByAsManyClaims) {
  const std::string sharing =
      "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n";
  dir_.Write("configs/plugin", "version: v1\nmode: plugin\n" + sharing);
  dir_.Write("configs/dra", "version: v1\nmode: dra\n" + sharing);
  api_.ServeConsumableCapacity(true);
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const auto& d) { return d.size() == 16; })) << Log();
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(sim_.AdmitPod("ml", "a", "main", kGpu, {std::string(kUuid0) + "::1"}, &r).ok())
      << Log();
  auto shares = [&](const std::string& name) {
    for (const std::string& json : api_.Slices(kNode)) {
      rapidjson::Document d;
      d.Parse(json.c_str());
      for (const auto& dev : d["spec"]["devices"].GetArray()) {
        if (dev["name"].GetString() != name) continue;
        if (!dev.HasMember("allowMultipleAllocations") || !dev["capacity"].HasMember("shares")) {
          return std::string("whole");
        }
        return std::string(dev["capacity"]["shares"]["value"].GetString());
      }
    }
    return std::string("absent");
  };
  api_.SetLabel(kNode, kLabel, "dra");
  ASSERT_TRUE(PublishedCount(7)) << Log();
  EXPECT_EQ(shares(kDevice0), "absent");
  EXPECT_EQ(shares(kDevice1), "2");
  auto share_claim = [&](const std::string& name, const std::string& device) {
    std::string json = ClaimJson(name, "uid-" + name, device);
    const std::string end = R"("device":")" + device + R"("})";
    json.replace(json.find(end), end.size(),
                 R"("device":")" + device + R"(","shareID":"share-)" + name +
                     R"(","consumedCapacity":{"shares":"1"}})");
    api_.PutResourceClaim("team", name, json);
  };
  share_claim("s0", kDevice0);
  share_claim("s1", kDevice1);
  share_claim("s2", kDevice1);
  EXPECT_NE(PrepareError("uid-s0", "s0").find("held by device-plugin pod ml/a"), std::string::npos);
  EXPECT_EQ(PrepareError("uid-s1", "s1"), "") << Log();
  EXPECT_EQ(PrepareError("uid-s2", "s2"), "") << Log();
  sim_.EndPod("ml", "a");
  ASSERT_TRUE(WaitFor([&] { return shares(kDevice0) == "2"; }, std::chrono::seconds(15))) << Log();
  EXPECT_TRUE(Serves("/metrics", "gpu_agent_dra_slice_repairs_total 0")) << Get("/metrics");

  // Back: GPU 1's replicas wait for both of its claims.
  api_.SetLabel(kNode, kLabel, "plugin");
  ASSERT_TRUE(PublishedCount(0)) << Log();
  const std::string r0 = std::string(kUuid1) + "::0", r1 = std::string(kUuid1) + "::1";
  ASSERT_TRUE(HealthIs(r0, "Unhealthy")) << Log();
  EXPECT_TRUE(HealthIs(r1, "Unhealthy")) << Log();
  EXPECT_TRUE(HealthIs(std::string(kUuid0) + "::0", "Healthy")) << Log();
  ASSERT_EQ(UnprepareError("uid-s1", "s1"), "") << Log();
  EXPECT_TRUE(HealthIs(r0, "Unhealthy")) << Log();
  ASSERT_EQ(UnprepareError("uid-s2", "s2"), "") << Log();
  EXPECT_TRUE(HealthIs(r0, "Healthy")) << Log();
  EXPECT_TRUE(HealthIs(r1, "Healthy")) << Log();
}

TEST_F(ModeHandoverTest, AnAgentKilledMidHandoverResumesItInEachDirection) {
  ASSERT_NO_FATAL_FAILURE(PluginModeWithTwoPods());
  api_.SetLabel(kNode, kLabel, "dra");
  ASSERT_TRUE(PublishedCount(6)) << Log();
  agent_->Signal(SIGKILL);
  agent_->Wait();
  // PodResources goes silent: a restarted agent offers no GPU of unknown
  // state, since the handover is on record.
  sim_.pod_resources()->FailWith(grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet busy"));
  StartAgent();
  ASSERT_TRUE(agent_->WaitForStderr("PodResources cannot be read; no GPU is offered")) << Log();
  EXPECT_TRUE(PublishedCount(0)) << Log();
  sim_.pod_resources()->SetAnswer(PodResourcesStandIn::Answer::kTable);
  ASSERT_TRUE(PublishedCount(6)) << Log();
  sim_.EndPod("ml", "a");
  sim_.EndPod("ml", "b");
  ASSERT_TRUE(PublishedCount(8)) << Log();

  // A claim on GPU 0, then back to plugin and killed: the restart keeps
  // GPU 0 from the device plugin's pods until its claim is unprepared.
  api_.PutResourceClaim("team", "c0", ClaimJson("c0", "uid-c0", kDevice0));
  ASSERT_EQ(PrepareError("uid-c0", "c0"), "") << Log();
  api_.SetLabel(kNode, kLabel, "plugin");
  ASSERT_TRUE(HealthIs(kUuid0, "Unhealthy")) << Log();
  agent_->Signal(SIGKILL);
  agent_->Wait();
  sim_.DisconnectCurrent(kGpu);
  StartAgent();
  ASSERT_TRUE(agent_->WaitForStderr("DRA claims are still prepared on this node")) << Log();
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 7, std::chrono::seconds(10))) << Log();
  EXPECT_TRUE(HealthIs(kUuid0, "Unhealthy")) << Log();
  ASSERT_TRUE(DraRegistered(true)) << Log();
  ASSERT_EQ(UnprepareError("uid-c0", "c0"), "") << Log();
  EXPECT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Log();
}

// DRA with migStrategy none (the shipped dra.yaml) prepares the MIG-mode
// GPU 0 whole; plugin mode with mixed (mig-mixed.yaml) cuts it into MIG
// devices: those are the claim's GPU all the same, kept from the device
// plugin's pods until it is unprepared.
TEST_F(ModeHandoverTest, TheDrainKeepsAClaimsGpuWhateverThePluginCutsItInto) {
  fixture_ = "2-gpu-mig.yaml";
  sys_ = "sys-mig";
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath(fixture_), dir_.Join(sys_)));
  dir_.Write("proc/driver/nvidia-caps/mig-minors",
             "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
             "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
             "gpu0/gi3/ci0/access 31\n");
  WriteFakeDevRoot(dir_.Join("devroot"), {0, 1}, {12, 13, 21, 22, 30, 31}, false);
  dir_.Write("configs/plugin", "version: v1\nmode: plugin\nflags:\n  migStrategy: mixed\n");
  dir_.Write("configs/dra", "version: v1\nmode: dra\nflags:\n  migStrategy: none\n");
  api_.SetLabel(kNode, kLabel, "dra");
  StartAgent();
  ASSERT_TRUE(DraRegistered(true)) << Log();
  ASSERT_TRUE(PublishedCount(2)) << Log();
  api_.PutResourceClaim("team", "c0", ClaimJson("c0", "uid-c0", kDevice1));  // 0000:07:00.0
  ASSERT_EQ(PrepareError("uid-c0", "c0"), "") << Log();
  api_.SetLabel(kNode, kLabel, "plugin");
  constexpr char kMig[] = "nvidia.com/mig-1g.10gb";
  ASSERT_TRUE(sim_.WaitForDevices(
      kMig,
      [](const std::vector<v1beta1::Device>& ds) {
        return ds.size() == 2 && std::all_of(ds.begin(), ds.end(), [](const v1beta1::Device& d) {
                 return d.health() == "Unhealthy";
               });
      }))
      << "GPU 0's MIG devices streamed while its whole-GPU claim is prepared\n"
      << Log();
  ASSERT_EQ(UnprepareError("uid-c0", "c0"), "") << Log();
  EXPECT_TRUE(sim_.WaitForDevices(kMig, [](const std::vector<v1beta1::Device>& ds) {
    return std::all_of(ds.begin(), ds.end(),
                       [](const v1beta1::Device& d) { return d.health() == "Healthy"; });
  })) << Log();
}

// A switch to DRA while the kubelet's PodResources cannot be read waits,
// saying so: the device plugin keeps the node (no GPU of unknown state is
// offered, and none leaves the scheduler meanwhile), and the switch is
// asked again until PodResources answers, then goes ahead.
TEST_F(ModeHandoverTest, ASwitchToDraWaitsWhilePodResourcesCannotBeRead) {
  ASSERT_NO_FATAL_FAILURE(PluginModeWithTwoPods());
  const std::string away = PodResourcesSocket() + ".away";
  ASSERT_EQ(::rename(PodResourcesSocket().c_str(), away.c_str()), 0);
  api_.SetLabel(kNode, kLabel, "dra");
  ASSERT_TRUE(agent_->WaitForStderr(
      "the node's config asks for dra mode; the switch waits, plugin mode keeps the node"))
      << Log();
  EXPECT_NE(Log().find("cannot tell which GPUs running pods hold through the device plugin"),
            std::string::npos)
      << Log();
  EXPECT_TRUE(ConditionIs("DevicePlugin",
                          "plugin mode; the switch to dra mode waits: cannot tell "
                          "which GPUs running pods hold"))
      << api_.Condition(kNode, "GpuAgentMode");
  // Asked again (after 5 s, then 10 s): the warning once, the plugin
  // serving all along, no slice.
  ASSERT_TRUE(
      WaitFor([&] { return Count(Log(), "reloading config") >= 2; }, std::chrono::seconds(15)))
      << Log();
  EXPECT_EQ(Count(Log(), "the switch waits, plugin mode keeps the node"), 1u) << Log();
  EXPECT_EQ(sim_.Allocatable(kGpu), 8);
  EXPECT_FALSE(dra_->plugin(kDriver).has_value());
  EXPECT_TRUE(api_.Slices(kNode).empty());
  ASSERT_EQ(::rename(away.c_str(), PodResourcesSocket().c_str()), 0);
  ASSERT_TRUE(DraRegistered(true)) << Log();
  ASSERT_TRUE(PublishedCount(6)) << Log();
}

// Relabelled while the agent was down: the agent that starts in the other
// mode puts the Node's GpuAgentMode condition right (it showed the mode
// before), and says nothing where the Node never showed one.
TEST_F(ModeHandoverTest, AnAgentStartedInAnotherModePutsTheConditionRight) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Log();
  // Read, and not written: the Node never showed it.
  ASSERT_TRUE(WaitFor([&] { return api_.calls().count("get nodes") > 0; })) << Log();
  EXPECT_EQ(api_.Condition(kNode, "GpuAgentMode"), "");
  api_.SetLabel(kNode, kLabel, "dra");
  ASSERT_TRUE(ConditionIs("Dra", "every GPU is offered through DRA"))
      << api_.Condition(kNode, "GpuAgentMode") << Log();
  // Stopped, relabelled, started in the other mode, each way.
  struct Start {
    const char* label;
    const char* reason;
    const char* message;
  };
  for (const Start& s :
       {Start{"plugin", "DevicePlugin", "every GPU is served by the device plugin"},
        Start{"dra", "Dra", "every GPU is offered through DRA"}}) {
    SCOPED_TRACE(s.label);
    agent_->Signal(SIGTERM);
    ASSERT_EQ(agent_->Wait(), 0) << Log();
    api_.SetLabel(kNode, kLabel, s.label);
    StartAgent();
    EXPECT_TRUE(ConditionIs(s.reason, s.message)) << api_.Condition(kNode, "GpuAgentMode") << Log();
  }
}

TEST_F(ModeHandoverTest, AModeThatCannotStartHandsTheNodeBack) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Log();
  // The kubelet's plugin registry folder is gone: DRA mode cannot serve
  // its registration.
  dra_->Stop();
  std::filesystem::remove_all(dir_.Join("registry"));
  const int registrations = sim_.registrations();
  api_.SetLabel(kNode, kLabel, "dra");
  ASSERT_TRUE(agent_->WaitForStderr("cannot start dra mode; going back to plugin mode")) << Log();
  ASSERT_TRUE(WaitFor([&] { return sim_.registrations() > registrations; })) << Log();
  EXPECT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Log();
  EXPECT_TRUE(agent_->Running());
}

TEST_F(ModeHandoverTest, ASwitchThatCannotRunHereKeepsTheRunningMode) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const auto& d) { return d.size() == 8; })) << Log();
  EXPECT_EQ(api_.Condition(kNode, "GpuAgentMode"), "") << "a node that never moved is not written";
  // An API server without resource.k8s.io: DRA cannot run; the plugin stays.
  api_.ServeResourceVersions({});
  api_.SetLabel(kNode, kLabel, "dra");
  ASSERT_TRUE(agent_->WaitForStderr("which cannot run here; staying in plugin mode")) << Log();
  EXPECT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(5))) << Log();
  EXPECT_FALSE(dra_->plugin(kDriver).has_value());
  // A label naming no config, and static mode (a restart's), leave it too.
  api_.SetLabel(kNode, kLabel, "nope");
  ASSERT_TRUE(agent_->WaitForStderr("no config named")) << Log();
  api_.SetLabel(kNode, kLabel, "static");
  ASSERT_TRUE(agent_->WaitForStderr("take effect only after a restart")) << Log();
  EXPECT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Log();
  EXPECT_FALSE(dra_->plugin(kDriver).has_value());
  EXPECT_TRUE(agent_->Running());
}

}  // namespace
}  // namespace gpu_agent::testing
