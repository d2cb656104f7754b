// DRA mode end to end: the real gpu-agent binary in `mode: dra` against the
// NVML stand-in (2-gpu-mig: GPU 0 with three MIG devices, GPU 1 whole), the
// API server stand-in holding the ResourceClaims, and the DRA kubelet
// stand-in registering it and calling prepare and unprepare on real unix
// sockets.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "api_server_stub.h"
#include "base/slotted_file.h"
#include "dra_kubelet.h"
#include "extended_resource_claim.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

constexpr char kDriver[] = "gpu.gpu-agent.github.io";
constexpr char kNode[] = "node-a";
constexpr char kVersion[] = "550.54.15";

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

std::string ClaimJson(const std::string& name, const std::string& uid,
                      const std::vector<std::array<std::string, 3>>& results,
                      const std::string& version = "v1") {
  std::string r;
  for (const auto& [request, driver, device] : results) {
    if (!r.empty()) r += ",";
    r += R"({"request":")" + request + R"(","driver":")" + driver + R"(","pool":")" + kNode +
         R"(","device":")" + device + R"("})";
  }
  return R"({"apiVersion":"resource.k8s.io/)" + version +
         R"(","kind":"ResourceClaim","metadata":{"name":")" + name +
         R"(","namespace":"team","uid":")" + uid +
         R"("},"spec":{"devices":{"requests":[{"name":"gpu"}]}},"status":{"allocation":{"devices":{"results":[)" +
         r + "]}}}}";
}

// `json` with `fields` (JSON members) added to each of its results.
std::string WithResultFields(std::string json, const std::string& fields) {
  for (size_t at = json.find(R"({"request":")"); at != std::string::npos;
       at = json.find(R"({"request":")", at + 1)) {
    json.insert(at + 1, fields + ",");
  }
  return json;
}

std::set<std::string> SpecDeviceNames(const std::string& path) {
  rapidjson::Document d;
  d.Parse(ReadFile(path).c_str());
  std::set<std::string> out;
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("devices")) return out;
  for (const auto& dev : d["devices"].GetArray()) out.insert(dev["name"].GetString());
  return out;
}

class DraModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteFakeDriverRoot(dir_.Join("driver"), kVersion));
    WriteFakeDevRoot(dir_.Join("devroot"), {0, 1}, {12, 13, 21, 22, 30, 31}, false);
    dir_.Write("proc/driver/nvidia-caps/mig-minors",
               "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
               "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
               "gpu0/gi3/ci0/access 31\n");
    ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
    ::mkdir(dir_.Join("registry").c_str(), 0755);
    ::mkdir(dir_.Join("plugins").c_str(), 0755);
    api_.ServeResourceVersions({"v1", "v1beta1"});
    api_.AddNode(kNode);
  }

  // The DRA kubelet stand-in, then the agent, until the kubelet has taken
  // the plugin's registration.
  // The kubelet stand-in started, then the agent (with `over`), registered.
  void StartRegistered(DraKubelet& kubelet, const std::map<std::string, std::string>& over = {}) {
    ASSERT_TRUE(kubelet.Start());
    StartAgent(over);
    ASSERT_TRUE(kubelet.WaitForPlugin(kDriver, std::chrono::seconds(20))) << Log();
  }

  // `over`: flags whose value replaces the default below.
  void StartAgent(const std::map<std::string, std::string>& over = {}) {
    agent_ = AgentProcess(over);
  }

  std::unique_ptr<Subprocess> AgentProcess(const std::map<std::string, std::string>& over) {
    std::vector<std::string> args = {BinaryPath(),
                                     "run",
                                     "--mode",
                                     "dra",
                                     "--node-name",
                                     kNode,
                                     "--proxy",
                                     api_.url(),
                                     "--dra-registry-dir",
                                     dir_.Join("registry"),
                                     "--dra-plugin-dir",
                                     dir_.Join("plugins"),
                                     "--cdi-spec-dir",
                                     dir_.Join("cdi"),
                                     "--mig-strategy",
                                     "mixed",
                                     "--nvidia-cdi-hook-path",
                                     "",
                                     "--nvidia-driver-root",
                                     dir_.Join("driver"),
                                     "--dev-root",
                                     dir_.Join("devroot"),
                                     "--proc-root",
                                     dir_.Join("proc"),
                                     "--sysfs-root",
                                     dir_.Join("sys")};
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (auto it = over.find(args[i]); it != over.end()) args[i + 1] = it->second;
    }
    for (const auto& [flag, value] : over) {
      if (std::find(args.begin(), args.end(), flag) == args.end()) {
        args.push_back(flag);
        args.push_back(value);
      }
    }
    auto env = FakeNvmlEnv(fixture_);
    env["FAKE_NVML_CONTROL"] = dir_.Join("nvml.ctl");
    return std::make_unique<Subprocess>(args, env);
  }

  DraKubelet::Options KubeletOptions() {
    DraKubelet::Options o;
    o.registry_dir = dir_.Join("registry");
    return o;
  }

  std::string Log() { return agent_ ? agent_->Stderr() : ""; }
  std::string SpecPath(const std::string& uid) {
    return dir_.Join("cdi/gpu-agent.github.io-claim_" + uid + ".json");
  }

  TempDir dir_;
  std::string fixture_ = FixturePath("2-gpu-mig.yaml");  // the NVML stand-in's
  ApiServerStub api_;                                    // outlives the agent
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(DraModeTest, RegistersPreparesABatchAndUnprepares) {
  api_.PutResourceClaim("team", "whole",
                        ClaimJson("whole", "uid-whole", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim(
      "team", "mig",
      ClaimJson("mig", "uid-mig", {{"gpu", kDriver, "gpu-0000-07-00-0-mig-1g-10gb-2-0"}}));
  api_.PutResourceClaim("team", "foreign",
                        ClaimJson("foreign", "uid-foreign", {{"gpu", "other.example.com", "x"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  EXPECT_EQ(kubelet.plugin(kDriver)->version, "v1.DRAPlugin");
  EXPECT_EQ(kubelet.plugin(kDriver)->endpoint, dir_.Join("plugins") + "/" + kDriver + "/dra.sock");

  std::map<std::string, dra::PrepareOutcome> out;
  const grpc::Status s = kubelet.Prepare(kDriver,
                                         {{"team", "uid-whole", "whole"},
                                          {"team", "uid-mig", "mig"},
                                          {"team", "uid-foreign", "foreign"},
                                          {"team", "uid-gone", "gone"}},
                                         &out);
  ASSERT_TRUE(s.ok()) << s.error_message() << Log();
  ASSERT_EQ(out.size(), 4u);
  ASSERT_EQ(out["uid-whole"].error, "") << Log();
  ASSERT_EQ(out["uid-whole"].devices.size(), 1u);
  EXPECT_EQ(out["uid-whole"].devices[0].device, "gpu-0000-0f-00-0");
  EXPECT_EQ(out["uid-whole"].devices[0].pool, kNode);
  EXPECT_EQ(out["uid-whole"].devices[0].request_names, std::vector<std::string>{"gpu"});
  EXPECT_EQ(out["uid-whole"].devices[0].cdi_ids,
            std::vector<std::string>{"gpu-agent.github.io/claim=uid-whole-gpu-0000-0f-00-0"});
  ASSERT_EQ(out["uid-mig"].error, "") << Log();
  EXPECT_EQ(out["uid-mig"].devices.at(0).cdi_ids,
            std::vector<std::string>{
                "gpu-agent.github.io/claim=uid-mig-gpu-0000-07-00-0-mig-1g-10gb-2-0"});
  EXPECT_NE(out["uid-foreign"].error.find("has no device of driver gpu.gpu-agent.github.io"),
            std::string::npos)
      << out["uid-foreign"].error;
  EXPECT_NE(out["uid-gone"].error.find("is gone from the API server"), std::string::npos)
      << out["uid-gone"].error;
  EXPECT_EQ(SpecDeviceNames(SpecPath("uid-whole")),
            std::set<std::string>{"uid-whole-gpu-0000-0f-00-0"});
  EXPECT_NE(ReadFile(SpecPath("uid-whole")).find("/dev/nvidia1"), std::string::npos);
  EXPECT_NE(ReadFile(SpecPath("uid-mig")).find("nvidia-cap22"), std::string::npos)
      << ReadFile(SpecPath("uid-mig"));
  EXPECT_FALSE(Exists(SpecPath("uid-foreign")));
  EXPECT_TRUE(api_.calls().count("get resourceclaims") > 0);

  std::map<std::string, std::string> un;
  ASSERT_TRUE(
      kubelet.Unprepare(kDriver, {{"team", "uid-whole", "whole"}, {"team", "x", "x"}}, &un).ok());
  EXPECT_EQ(un, (std::map<std::string, std::string>{{"uid-whole", ""}, {"x", ""}}));
  EXPECT_FALSE(Exists(SpecPath("uid-whole")));
  EXPECT_TRUE(Exists(SpecPath("uid-mig")));

  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Log();
  EXPECT_FALSE(Exists(dir_.Join("registry") + "/" + kDriver + "-reg.sock"));
  EXPECT_FALSE(Exists(dir_.Join("plugins") + "/" + kDriver + "/dra.sock"));
  EXPECT_TRUE(Exists(SpecPath("uid-mig")));  // its container still runs
}

// A pod that asks nvidia.com/gpu and nvidia.com/mig-1g.10gb in its limits,
// no claim: the claim the 1.36 scheduler makes for it through the classes
// with extendedResourceName (requests container-<i>-request-<j>), prepared
// as any claim; each container gets the CDI ids of its own requests.
TEST_F(DraModeTest, PreparesTheClaimTheSchedulerMakesForAnExtendedResourcePod) {
  const ExtendedPod pod{"team",
                        "trainer",
                        "pod-uid",
                        {},
                        {{"side", {{"cpu", 1}}},
                         {"main", {{"cpu", 1}, {"memory", 1}, {"nvidia.com/gpu", 1}}},
                         {"mig", {{"nvidia.com/mig-1g.10gb", 1}}}}};
  const ExtendedClaim claim =
      MakeExtendedClaim(pod, "uid-ext",
                        {{"nvidia.com/gpu", "nvidia-gpu.gpu.gpu-agent.github.io"},
                         {"nvidia.com/mig-1g.10gb", "nvidia-mig-1g.10gb.gpu.gpu-agent.github.io"}},
                        kDriver, kNode, {"gpu-0000-0f-00-0", "gpu-0000-07-00-0-mig-1g-10gb-2-0"});
  ASSERT_EQ(claim.request_names,
            (std::vector<std::string>{"container-1-request-2", "container-2-request-0"}));
  api_.PutResourceClaim("team", claim.name, claim.json);
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));

  std::map<std::string, dra::PrepareOutcome> out;
  const grpc::Status s = kubelet.Prepare(kDriver, {{"team", "uid-ext", claim.name}}, &out);
  ASSERT_TRUE(s.ok()) << s.error_message() << Log();
  ASSERT_EQ(out["uid-ext"].error, "") << Log();
  ASSERT_EQ(out["uid-ext"].devices.size(), 2u);
  EXPECT_EQ(out["uid-ext"].devices[0].request_names,
            std::vector<std::string>{"container-1-request-2"});
  EXPECT_EQ(ExtendedContainerCdiIds(out["uid-ext"], claim.mappings, pod.containers[1]),
            std::vector<std::string>{"gpu-agent.github.io/claim=uid-ext-gpu-0000-0f-00-0"});
  EXPECT_EQ(ExtendedContainerCdiIds(out["uid-ext"], claim.mappings, pod.containers[2]),
            std::vector<std::string>{
                "gpu-agent.github.io/claim=uid-ext-gpu-0000-07-00-0-mig-1g-10gb-2-0"});
  EXPECT_TRUE(ExtendedContainerCdiIds(out["uid-ext"], claim.mappings, pod.containers[0]).empty());
  EXPECT_NE(ReadFile(SpecPath("uid-ext")).find("/dev/nvidia1"), std::string::npos);
  EXPECT_NE(ReadFile(SpecPath("uid-ext")).find("nvidia-cap22"), std::string::npos);

  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-ext", claim.name}}, &un).ok());
  EXPECT_EQ(un, (std::map<std::string, std::string>{{"uid-ext", ""}}));
  EXPECT_FALSE(Exists(SpecPath("uid-ext")));
}

// The device names of the node's published slices, and their generation.
std::set<std::string> PublishedDevices(ApiServerStub& api, int64_t* generation = nullptr) {
  std::set<std::string> out;
  for (const std::string& json : api.Slices(kNode)) {
    rapidjson::Document d;
    d.Parse(json.c_str());
    if (generation) *generation = d["spec"]["pool"]["generation"].GetInt64();
    for (const auto& dev : d["spec"]["devices"].GetArray()) out.insert(dev["name"].GetString());
  }
  return out;
}

TEST_F(DraModeTest, PublishesTheNodesSlicesAndRepublishesWhatTheKubeletDeletes) {
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  StartAgent();
  const std::set<std::string> want = {"gpu-0000-07-00-0-mig-2g-20gb-1-0",
                                      "gpu-0000-07-00-0-mig-1g-10gb-2-0",
                                      "gpu-0000-07-00-0-mig-1g-10gb-3-0", "gpu-0000-0f-00-0"};
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_) == want; }, std::chrono::seconds(20)))
      << Log();
  const std::string slice = api_.Slices(kNode).at(0);
  EXPECT_NE(slice.find(R"("uid":"uid-node-node-a")"), std::string::npos) << slice;
  EXPECT_NE(slice.find(R"("driver":"gpu.gpu-agent.github.io")"), std::string::npos) << slice;
  const int writes = api_.slice_writes();
  // What a starting kubelet does: deletes every slice of its node.
  api_.DeleteNodeSlices(kNode);
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_) == want; }, std::chrono::seconds(10)))
      << Log();
  int64_t generation = 0;
  PublishedDevices(api_, &generation);
  EXPECT_EQ(generation, 1);  // the same content, the same generation
  EXPECT_EQ(api_.slice_writes(), writes + 1) << Log() << [&] {
    std::string calls;
    for (const auto& r : api_.requests()) calls += r.call + "\n";
    return calls;
  }();
  EXPECT_FALSE(api_.calls().count("patch resourceslices"));
  // A reload that finds the same devices publishes nothing new.
  const int before_reload = api_.slice_writes();
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(agent_->WaitForStderr("reload done")) << Log();
  EXPECT_FALSE(WaitFor([&] { return api_.slice_writes() != before_reload; },
                       std::chrono::milliseconds(500)));
  PublishedDevices(api_, &generation);
  EXPECT_EQ(generation, 1);
}

TEST_F(DraModeTest, RefusedSliceRequestsAreLoggedRetriedAndEndInTheNodesSlices) {
  // RBAC not granted yet at the first list; the server throttling the first
  // create, asking for a wait longer than the backoff (1 s by then).
  api_.FailNextSliceRequests("list", 403, 1);
  api_.FailNextSliceRequests("create", 429, 1, /*retry_after_s=*/2);
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  StartAgent();
  const std::set<std::string> want = {"gpu-0000-07-00-0-mig-2g-20gb-1-0",
                                      "gpu-0000-07-00-0-mig-1g-10gb-2-0",
                                      "gpu-0000-07-00-0-mig-1g-10gb-3-0", "gpu-0000-0f-00-0"};
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_) == want; }, std::chrono::seconds(20)))
      << Log();
  EXPECT_EQ(api_.failed_slice_requests(), 2);
  EXPECT_NE(Log().find("ResourceSlices: cannot list them; retrying"), std::string::npos) << Log();
  // A 403 at once after the start (a server whose RBAC is still loading
  // answers so): said for what it is, no guess at the role.
  EXPECT_NE(Log().find("403: resourceslices.resource.k8s.io is forbidden"), std::string::npos)
      << Log();
  EXPECT_NE(Log().find("the API server's authorization refused it; a server that has just "
                       "started does so until it has loaded its RBAC rules"),
            std::string::npos)
      << Log();
  EXPECT_EQ(Log().find("ClusterRole must allow"), std::string::npos) << Log();
  EXPECT_NE(Log().find("429: Too many requests"), std::string::npos) << Log();
  EXPECT_NE(Log().find("retry_in=2s"), std::string::npos) << Log();
  const int slices = static_cast<int>(api_.Slices(kNode).size());
  EXPECT_EQ(api_.slice_writes(), slices + 1);  // the refused create, then each once
  // Mid-run: the kubelet deletes the slices while etcd times out twice on
  // the creates that repair them, and the watch after that is refused.
  api_.FailNextSliceRequests("create", 500, 2);
  api_.FailNextSliceRequests("watch", 500, 1);
  const int writes = api_.slice_writes();
  api_.DeleteNodeSlices(kNode);
  ASSERT_TRUE(WaitFor([&] { return api_.failed_slice_requests() == 5; }, std::chrono::seconds(20)))
      << Log();
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_) == want; }, std::chrono::seconds(20)))
      << Log();
  EXPECT_NE(Log().find("500: Internal error occurred: etcdserver: request timed out"),
            std::string::npos)
      << Log();
  // Logged once the agent has read the answer the stand-in counted.
  EXPECT_TRUE(agent_->WaitForStderr("ResourceSlices: cannot watch them; retrying")) << Log();
  // No write storm: the two refused creates, then each slice once (the
  // refused watch came after them).
  EXPECT_EQ(api_.slice_writes(), writes + 2 + slices);
  int64_t generation = 0;
  PublishedDevices(api_, &generation);
  EXPECT_EQ(generation, 1);
  EXPECT_TRUE(agent_->Running());
}

TEST_F(DraModeTest, AnUnhealthyGpuIsRefusedAtPrepareLeavesTheSlicesAndIsReportedUnhealthy) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).count("gpu-0000-0f-00-0") == 1; }))
      << Log();
  ASSERT_TRUE(WaitFor([&] { return Exists(dir_.Join("nvml.ctl")); }));
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 1 79"));  // GPU 1 fell off the bus
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).count("gpu-0000-0f-00-0") == 0; }))
      << Log();
  int64_t generation = 0;
  EXPECT_EQ(PublishedDevices(api_, &generation).size(), 3u);
  EXPECT_EQ(generation, 2);
  // The stand-in drops taints by default, as a server with the gate off.
  EXPECT_NE(Log().find("the API server drops device taints"), std::string::npos) << Log();
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok());
  EXPECT_EQ(out["uid-a"].error,
            "claim team/a: device \"gpu-0000-0f-00-0\" is unhealthy (taint "
            "gpu.gpu-agent.github.io/unhealthy=XID-79:NoExecute, which the claim does not "
            "tolerate; admin access would take it)");
  EXPECT_FALSE(Exists(SpecPath("uid-a")));
  std::vector<DraKubelet::Health> health;
  ASSERT_TRUE(kubelet.FirstHealth(kDriver, &health).ok());
  ASSERT_EQ(health.size(), 4u);
  for (const DraKubelet::Health& h : health) {
    EXPECT_EQ(h.pool, kNode);
    EXPECT_EQ(h.healthy, h.device != "gpu-0000-0f-00-0") << h.device;
    // Why, where it is unhealthy: the health watcher's reason.
    EXPECT_EQ(h.message.find("79") != std::string::npos, h.device == "gpu-0000-0f-00-0")
        << h.message;
  }
}

// health.nodeEvents works in DRA mode as in the others: with it on, a GPU
// that goes unhealthy is an Event on the Node and turns the GpuHealthy
// condition False.
TEST_F(DraModeTest, NodeEventsOnPostsANodeEventWhenAGpuGoesUnhealthy) {
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet, {{"--health-node-events", "on"}}));
  ASSERT_TRUE(WaitFor([&] {
    return Log().find("GPU health events go on the Node") != std::string::npos;
  })) << Log();
  ASSERT_TRUE(WaitFor([&] { return Exists(dir_.Join("nvml.ctl")); }));
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 1 79"));  // GPU 1 fell off the bus
  ASSERT_TRUE(WaitFor([&] { return api_.events().size() == 1; })) << Log();
  EXPECT_NE(api_.events()[0].find("GPU 1 (GPU-"), std::string::npos) << api_.events()[0];
  EXPECT_NE(api_.events()[0].find("xid unhealthy"), std::string::npos) << api_.events()[0];
  ASSERT_TRUE(WaitFor([&] {
    return api_.Condition(kNode, "GpuHealthy").find("\"status\":\"False\"") != std::string::npos;
  })) << Log();
}

// The taints of device `name` in the node's slices, as "key=value:effect".
std::vector<std::string> TaintsOf(ApiServerStub& api, const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& json : api.Slices(kNode)) {
    rapidjson::Document d;
    d.Parse(json.c_str());
    for (const auto& dev : d["spec"]["devices"].GetArray()) {
      if (dev["name"].GetString() != name || !dev.HasMember("taints")) continue;
      for (const auto& t : dev["taints"].GetArray()) {
        out.push_back(std::string(t["key"].GetString()) + "=" + t["value"].GetString() + ":" +
                      t["effect"].GetString());
      }
    }
  }
  return out;
}

TEST_F(DraModeTest, WhereTheServerKeepsTaintsAnUnhealthyGpuStaysInTheSlicesTainted) {
  api_.ServeDeviceTaints(true);
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; })) << Log();
  EXPECT_NE(Log().find("the API server keeps device taints"), std::string::npos) << Log();
  EXPECT_EQ(TaintsOf(api_, "gpu-0000-0f-00-0"), std::vector<std::string>{});
  ASSERT_TRUE(WaitFor([&] { return Exists(dir_.Join("nvml.ctl")); }));
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 1 79"));  // GPU 1 fell off the bus
  ASSERT_TRUE(WaitFor([&] { return !TaintsOf(api_, "gpu-0000-0f-00-0").empty(); })) << Log();
  const std::vector<std::string> taints = TaintsOf(api_, "gpu-0000-0f-00-0");
  ASSERT_EQ(taints.size(), 1u);
  EXPECT_EQ(taints[0].rfind("gpu.gpu-agent.github.io/unhealthy=XID", 0), 0u) << taints[0];
  // Off the bus (XID 79): its jobs cannot go on, NoExecute.
  EXPECT_EQ(taints[0].substr(taints[0].size() - 10), ":NoExecute") << taints[0];
  int64_t generation = 0;
  EXPECT_EQ(PublishedDevices(api_, &generation).size(), 4u);  // it stays
  EXPECT_EQ(generation, 2);
  EXPECT_EQ(TaintsOf(api_, "gpu-0000-07-00-0-mig-1g-10gb-2-0"), std::vector<std::string>{});
  // The scheduler allocates a tainted device only to a claim that
  // tolerates the taint or asks for admin access: those get it, another
  // is refused naming the taint.
  api_.PutResourceClaim(
      "team", "tolerating",
      WithResultFields(
          ClaimJson("tolerating", "uid-tol", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}),
          R"("tolerations":[{"key":"gpu.gpu-agent.github.io/unhealthy","operator":"Exists"}])"));
  api_.PutResourceClaim(
      "team", "admin",
      WithResultFields(ClaimJson("admin", "uid-admin", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}),
                       R"("adminAccess":true)"));
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet
                  .Prepare(kDriver,
                           {{"team", "uid-a", "a"},
                            {"team", "uid-tol", "tolerating"},
                            {"team", "uid-admin", "admin"}},
                           &out)
                  .ok());
  EXPECT_EQ(out["uid-a"].error,
            "claim team/a: device \"gpu-0000-0f-00-0\" is unhealthy (taint " + taints[0] +
                ", which the claim does not tolerate; admin access would take it)");
  EXPECT_EQ(out["uid-tol"].error, "") << Log();
  EXPECT_EQ(out["uid-admin"].error, "") << Log();
  EXPECT_TRUE(Exists(SpecPath("uid-tol")));
  EXPECT_TRUE(Exists(SpecPath("uid-admin")));
}

// Each cause of trouble taints with its own effect: the driver asking for
// a reset or reboot (recoveryAction) NoExecute on the GPU and each of its
// MIG devices, an XID NoSchedule, a degraded check None where the server
// serves that effect (1.36); dra.taints changes any of them. Where the
// server knows no None (1.33 to 1.35) the degraded device is published
// without a taint.
TEST_F(DraModeTest, EachCauseTaintsWithItsEffectAndNoneOnlyWhereServed) {
  api_.ServeDeviceTaints(true);
  api_.ServeNoneTaintEffect(true);
  dir_.Write("taints.yaml", "version: v1\nmode: dra\ndra:\n  taints:\n    xid: NoExecute\n");
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet, {{"--health-poll-interval", "1s"}}));
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; })) << Log();
  EXPECT_NE(Log().find("the None effect too"), std::string::npos) << Log();
  ASSERT_TRUE(WaitFor([&] { return Exists(dir_.Join("nvml.ctl")); }));
  const std::string whole = "gpu-0000-0f-00-0";
  const std::string mig = "gpu-0000-07-00-0-mig-1g-10gb-2-0";
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "set 1 temperature 88"));  // slowdown at 87
  ASSERT_TRUE(WaitFor([&] { return !TaintsOf(api_, whole).empty(); }, std::chrono::seconds(10)))
      << Log();
  EXPECT_EQ(TaintsOf(api_, whole),
            std::vector<std::string>{"gpu.gpu-agent.github.io/degraded=temperature:None"});
  // Informational: a claim still gets it.
  api_.PutResourceClaim("team", "a", ClaimJson("a", "uid-a", {{"gpu", kDriver, whole}}));
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok());
  EXPECT_EQ(out["uid-a"].error, "") << Log();
  // The driver asks for a GPU reset: NoExecute on all of GPU 0's MIG devices.
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "set 0 recoveryAction 1"));
  ASSERT_TRUE(WaitFor([&] { return !TaintsOf(api_, mig).empty(); }, std::chrono::seconds(10)))
      << Log();
  ASSERT_EQ(TaintsOf(api_, mig).size(), 1u);
  EXPECT_EQ(TaintsOf(api_, mig)[0].rfind("gpu.gpu-agent.github.io/unhealthy=health-check-", 0), 0u)
      << TaintsOf(api_, mig)[0];
  EXPECT_EQ(TaintsOf(api_, mig)[0].substr(TaintsOf(api_, mig)[0].size() - 10), ":NoExecute");
  // An XID under dra.taints.xid: NoExecute (the config's, not the
  // default NoSchedule).
  agent_->Signal(SIGTERM);
  ASSERT_EQ(agent_->Wait(), 0) << Log();
  StartAgent({{"--health-poll-interval", "1s"}, {"--config", dir_.Join("taints.yaml")}});
  ASSERT_TRUE(WaitFor([&] { return kubelet.plugins(kDriver).size() == 1; })) << Log();
  ASSERT_TRUE(WaitFor([&] { return Exists(dir_.Join("nvml.ctl")); }));
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 1 48"));
  ASSERT_TRUE(WaitFor([&] {
    return TaintsOf(api_, whole) ==
           std::vector<std::string>{"gpu.gpu-agent.github.io/unhealthy=XID-48:NoExecute"};
  })) << Log();
}

// Before 1.36 the API server knows no None effect: the probe asks again
// without it, and a degraded device is published with no taint.
TEST_F(DraModeTest, WhereTheServerKnowsNoNoneEffectADegradedGpuHasNoTaint) {
  api_.ServeDeviceTaints(true);
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet, {{"--health-poll-interval", "1s"}}));
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; })) << Log();
  EXPECT_NE(Log().find("the API server refuses the None taint effect"), std::string::npos) << Log();
  EXPECT_NE(Log().find("the API server keeps device taints; an unhealthy device stays"),
            std::string::npos)
      << Log();
  ASSERT_TRUE(WaitFor([&] { return Exists(dir_.Join("nvml.ctl")); }));
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "set 1 temperature 88"));
  ASSERT_TRUE(WaitFor([&] { return Log().find("GPU health check failing") != std::string::npos; },
                      std::chrono::seconds(10)))
      << Log();
  EXPECT_EQ(TaintsOf(api_, "gpu-0000-0f-00-0"), std::vector<std::string>{});
  EXPECT_EQ(PublishedDevices(api_).size(), 4u);
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 1 48"));
  ASSERT_TRUE(WaitFor([&] {
    return TaintsOf(api_, "gpu-0000-0f-00-0") ==
           std::vector<std::string>{"gpu.gpu-agent.github.io/unhealthy=XID-48:NoSchedule"};
  })) << Log();
}

// Where the server keeps taints, a GPU that recovers loses its taint: it
// stays in the slices throughout, tainted under the next generation, then
// untainted under the one after, in one replace of the slice.
TEST_F(DraModeTest, WhereTheServerKeepsTaintsARecoveredGpuLosesItsTaint) {
  api_.ServeDeviceTaints(true);
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet, {{"--health-recovery-period", "300ms"}}));
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; })) << Log();
  int64_t generation = 0;
  PublishedDevices(api_, &generation);
  EXPECT_EQ(generation, 1);
  ASSERT_TRUE(WaitFor([&] { return Exists(dir_.Join("nvml.ctl")); }));
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 1 79"));  // GPU 1 fell off the bus
  ASSERT_TRUE(WaitFor([&] { return !TaintsOf(api_, "gpu-0000-0f-00-0").empty(); })) << Log();
  EXPECT_EQ(PublishedDevices(api_, &generation).size(), 4u);
  EXPECT_EQ(generation, 2);
  const size_t stored = api_.stored_slice_names().size();
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "reset 1"));
  ASSERT_TRUE(
      WaitFor([&] { return TaintsOf(api_, "gpu-0000-0f-00-0").empty(); }, std::chrono::seconds(20)))
      << Log();
  EXPECT_EQ(PublishedDevices(api_, &generation).size(), 4u);
  EXPECT_EQ(generation, 3);
  // One replace from tainted to untainted: gpu-0000-0f-00-0 was never out.
  EXPECT_EQ(api_.stored_slice_names().size() - stored, 1u);
  for (const std::string& device : PublishedDevices(api_)) {
    EXPECT_EQ(TaintsOf(api_, device), std::vector<std::string>{}) << device;
  }
}

TEST_F(DraModeTest, SigtermMidPrepareEndsPromptlyAndTheNextAgentPrepares) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  api_.HangClaimGets(true);
  std::map<std::string, dra::PrepareOutcome> out;
  grpc::Status status;
  std::thread call([&] { status = kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out); });
  ASSERT_TRUE(WaitFor([&] { return api_.held_claim_gets() == 1; })) << Log();
  const auto t0 = std::chrono::steady_clock::now();
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(std::chrono::seconds(10)), 0) << Log();
  const auto took = std::chrono::steady_clock::now() - t0;
  call.join();
  EXPECT_LT(took, std::chrono::seconds(5)) << "the stop waited for the hung claim GET";
  // The kubelet learns the claim is not prepared, by the call or the claim.
  EXPECT_TRUE(!status.ok() || !out["uid-a"].error.empty()) << status.error_message();
  EXPECT_FALSE(Exists(SpecPath("uid-a")));
  api_.HangClaimGets(false);
  StartAgent();
  ASSERT_TRUE(WaitFor(
      [&] {
        std::map<std::string, dra::PrepareOutcome> again;
        return kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &again).ok() &&
               again["uid-a"].error.empty();
      },
      std::chrono::seconds(20)))
      << Log();
  EXPECT_TRUE(Exists(SpecPath("uid-a")));
}

// A batch's GETs go out together, and a stop cuts off every one in flight.
TEST_F(DraModeTest, ABatchsClaimGetsGoOutTogetherAndSigtermCutsThemAllOff) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim("team", "b",
                        ClaimJson("b", "uid-b", {{"gpu", kDriver, "gpu-0000-07-00-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  api_.HangClaimGets(true);
  std::map<std::string, dra::PrepareOutcome> out;
  grpc::Status status;
  std::thread call([&] {
    status = kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}, {"team", "uid-b", "b"}}, &out);
  });
  EXPECT_TRUE(WaitFor([&] { return api_.held_claim_gets() == 2; })) << Log();
  const auto t0 = std::chrono::steady_clock::now();
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(std::chrono::seconds(10)), 0) << Log();
  const auto took = std::chrono::steady_clock::now() - t0;
  call.join();
  api_.HangClaimGets(false);
  EXPECT_LT(took, std::chrono::seconds(5)) << "the stop waited for a hung claim GET";
  for (const char* uid : {"uid-a", "uid-b"}) {
    EXPECT_TRUE(!status.ok() || !out[uid].error.empty()) << uid;
    EXPECT_FALSE(Exists(SpecPath(uid))) << uid;
  }
}

TEST_F(DraModeTest, AKubeletGoneMidPrepareLosesNothingAndItsRetryIsAnswered) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet::Options o = KubeletOptions();
  o.call_deadline = std::chrono::milliseconds(300);
  DraKubelet kubelet(o);
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  api_.HangClaimGets(true);
  std::map<std::string, dra::PrepareOutcome> out;
  const grpc::Status gone = kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << gone.error_message();
  api_.HangClaimGets(false);
  // The agent finishes the prepare the kubelet gave up on; the retry gets
  // the same answer without a second GET.
  ASSERT_TRUE(WaitFor([&] { return Exists(SpecPath("uid-a")); })) << Log();
  const int gets = api_.claim_get_count();
  out.clear();
  ASSERT_TRUE(WaitFor([&] {
    return kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok();
  })) << Log();
  EXPECT_EQ(out["uid-a"].error, "");
  EXPECT_EQ(out["uid-a"].devices.at(0).device, "gpu-0000-0f-00-0");
  EXPECT_EQ(api_.claim_get_count(), gets);
}

// The devices a container gets from a prepared claim's CDI ids, as podman
// resolves them: the paths in the OCI config.json podman writes. Empty, with
// `*error` set, when podman refuses.
std::set<std::string> PodmanDevices(const std::string& storage, const std::string& cdi_id,
                                    std::string* error) {
  const std::string p = "podman --root " + storage + "/root --runroot " + storage +
                        "/runroot --tmpdir " + storage + "/tmp --storage-driver vfs " +
                        "--cgroup-manager cgroupfs --events-backend none ";
  ::mkdir((storage + "/rootfs").c_str(), 0755);
  ::mkdir((storage + "/tmp").c_str(), 0755);
  const std::string out = storage + "/out";
  if (std::system((p + "create --network none --device " + cdi_id + " --rootfs " + storage +
                   "/rootfs /bin/true > " + out + " 2>&1")
                      .c_str()) != 0) {
    *error = ReadFile(out);
    return {};
  }
  std::string id = ReadFile(out);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  const int init = std::system((p + "init " + id + " > " + out + " 2>&1").c_str());
  const std::string config = storage + "/root/vfs-containers/" + id + "/userdata/config.json";
  std::set<std::string> paths;
  if (init == 0 || Exists(config)) {
    rapidjson::Document d;
    d.Parse(ReadFile(config).c_str());
    if (!d.HasParseError() && d.HasMember("linux") && d["linux"].HasMember("devices")) {
      for (const auto& dev : d["linux"]["devices"].GetArray()) {
        paths.insert(dev["path"].GetString());
      }
    }
  }
  if (paths.empty()) *error = ReadFile(out);
  std::system((p + "rm -f " + id + " > /dev/null 2>&1").c_str());
  return paths;
}

// What a container runtime does with prepare's answer: podman (a real CDI
// consumer; it reads /var/run/cdi) resolves each CDI id to the claim's
// device nodes, and refuses it once the claim is unprepared. Root and podman
// only; skipped otherwise.
TEST_F(DraModeTest, PodmanResolvesTheCdiIdsPrepareAnswersUntilUnprepare) {
  if (::geteuid() != 0 || std::system("command -v podman > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs root (device nodes, rootful podman) and podman";
  }
  TempDir t;
  ASSERT_TRUE(WriteFakeDevRoot(t.Join("dev"), {0, 1}, {12, 13, 21, 22, 30, 31}, true));
  // Left as found: the folder is removed again if this test made it.
  const bool made_cdi_dir = !Exists("/var/run/cdi");
  struct RemoveIfMade {
    bool made;
    ~RemoveIfMade() {
      if (made) ::rmdir("/var/run/cdi");
    }
  } remove_if_made{made_cdi_dir};
  // A kind of its own: no clash with a real spec in /var/run/cdi.
  const std::string vendor = "gpu-agent-dra-test-" + std::to_string(::getpid()) + ".example";
  api_.PutResourceClaim("team", "whole",
                        ClaimJson("whole", "uid-whole", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim(
      "team", "mig",
      ClaimJson("mig", "uid-mig", {{"gpu", kDriver, "gpu-0000-07-00-0-mig-1g-10gb-2-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  StartAgent({{"--cdi-spec-dir", "/var/run/cdi"},
              {"--cdi-vendor", vendor},
              {"--dev-root", t.Join("dev")}});
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver, std::chrono::seconds(20))) << Log();
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(
      kubelet.Prepare(kDriver, {{"team", "uid-whole", "whole"}, {"team", "uid-mig", "mig"}}, &out)
          .ok());
  ASSERT_EQ(out["uid-whole"].error, "") << Log();
  ASSERT_EQ(out["uid-mig"].error, "") << Log();
  std::string error;
  const std::set<std::string> whole =
      PodmanDevices(t.path(), out["uid-whole"].devices.at(0).cdi_ids.at(0), &error);
  EXPECT_TRUE(whole.count("/dev/nvidia1") && whole.count("/dev/nvidiactl") &&
              !whole.count("/dev/nvidia0"))
      << error;
  const std::set<std::string> mig =
      PodmanDevices(t.path(), out["uid-mig"].devices.at(0).cdi_ids.at(0), &error);
  EXPECT_TRUE(mig.count("/dev/nvidia0") && mig.count("/dev/nvidia-caps/nvidia-cap22") &&
              !mig.count("/dev/nvidia1"))
      << error;
  std::map<std::string, std::string> un;
  ASSERT_TRUE(
      kubelet.Unprepare(kDriver, {{"team", "uid-whole", "whole"}, {"team", "uid-mig", "mig"}}, &un)
          .ok());
  error.clear();
  EXPECT_TRUE(
      PodmanDevices(t.path(), out["uid-whole"].devices.at(0).cdi_ids.at(0), &error).empty());
  EXPECT_NE(error.find("unresolvable CDI devices"), std::string::npos) << error;
  agent_->Signal(SIGTERM);
  agent_->Wait();
}

TEST_F(DraModeTest, TheNodesConfigLabelPicksTheConfigAndTheSlicesFollow) {
  dir_.Write("nc/one.yaml", "version: v1\nmode: dra\ndevices:\n  include: [\"index:1\"]\n");
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  StartAgent({{"--node-config-dir", dir_.Join("nc")}});
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; }, std::chrono::seconds(20)))
      << Log();
  api_.SetLabel(kNode, "nvidia.com/device-plugin.config", "one");
  ASSERT_TRUE(WaitFor([&] {
    return PublishedDevices(api_) == std::set<std::string>{"gpu-0000-0f-00-0"};
  })) << Log();
  int64_t generation = 0;
  PublishedDevices(api_, &generation);
  EXPECT_EQ(generation, 2);
}

TEST_F(DraModeTest, AKubeletRestartRegistersThePluginAgain) {
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  ASSERT_TRUE(kubelet.Restart());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver)) << Log();
  EXPECT_EQ(kubelet.registrations(), 2);
  std::map<std::string, std::string> un;
  EXPECT_TRUE(kubelet.Unprepare(kDriver, {{"team", "x", "x"}}, &un).ok());
}

TEST_F(DraModeTest, AKubeletThatKnowsOnlyV1beta1GetsItAndApiErrorsArePerClaim) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim("team", "b",
                        ClaimJson("b", "uid-b", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet::Options o = KubeletOptions();
  o.known_versions = {"v1beta1.DRAPlugin"};
  DraKubelet kubelet(o);
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  EXPECT_EQ(kubelet.plugin(kDriver)->version, "v1beta1.DRAPlugin");
  for (int code : {403, 429, 500}) {
    api_.FailNextClaimGets(code);
    std::map<std::string, dra::PrepareOutcome> out;
    ASSERT_TRUE(
        kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}, {"team", "uid-b", "b"}}, &out).ok());
    // The two GETs go out together: whichever the server failed has the
    // error, the other its devices.
    const bool a_failed = !out["uid-a"].error.empty();
    const dra::PrepareOutcome& failed = out[a_failed ? "uid-a" : "uid-b"];
    const dra::PrepareOutcome& other = out[a_failed ? "uid-b" : "uid-a"];
    EXPECT_NE(failed.error.find("the API server answered " + std::to_string(code)),
              std::string::npos)
        << failed.error;
    EXPECT_TRUE(failed.devices.empty());
    EXPECT_EQ(other.error, "") << code;  // its own GET succeeded
    EXPECT_EQ(other.devices.size(), 1u);
    std::map<std::string, std::string> un;
    ASSERT_TRUE(
        kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}, {"team", "uid-b", "b"}}, &un).ok());
  }
}

// The plugin's folder is 0750 whatever the umask (it was made with the
// process's), its sockets and its checkpoint the agent's alone.
TEST_F(DraModeTest, ItsFolderSocketsAndCheckpointHaveTheirModes) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok());
  ASSERT_EQ(out["uid-a"].error, "");
  const std::string folder = dir_.Join("plugins/") + kDriver;
  struct Want {
    std::string path;
    mode_t mode;
  };
  for (const Want& w : {Want{folder, 0750}, Want{folder + "/dra.sock", 0600},
                        Want{dir_.Join("registry/") + kDriver + "-reg.sock", 0600},
                        Want{folder + "/checkpoint.json", 0600}, Want{SpecPath("uid-a"), 0644}}) {
    struct stat st;
    ASSERT_EQ(::lstat(w.path.c_str(), &st), 0) << w.path;
    EXPECT_EQ(st.st_mode & 07777, w.mode) << w.path;
  }
}

// A hostile API server: discovery nested 200,000 deep (it crashed the agent
// at every start), a claim as deep, and a claim named to reach another
// path. The agent keeps running, each claim gets its own error, and once
// discovery answers as a server does the slices go out.
TEST_F(DraModeTest, AHostileApiServerNeitherCrashesNorMisleadsTheAgent) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  api_.AnswerWith("get resource.k8s.io", deep);
  api_.PutResourceClaim("team", "deep", deep);
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  ASSERT_TRUE(WaitFor([&] {
    return Log().find(
               "resource.k8s.io APIGroup nests arrays and objects deeper than 128 "
               "levels") != std::string::npos;
  })) << Log();
  const int gets = api_.claim_get_count();
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet
                  .Prepare(kDriver,
                           {{"default/../../../api/v1/secrets?x=", "uid-p", "c"},
                            {"team", "uid-d", "deep"}},
                           &out)
                  .ok());
  EXPECT_NE(out["uid-p"].error.find("cannot be a ResourceClaim: its namespace is not a DNS"),
            std::string::npos)
      << out["uid-p"].error;
  EXPECT_NE(out["uid-d"].error.find("nests arrays and objects deeper than 128 levels"),
            std::string::npos)
      << out["uid-d"].error;
  EXPECT_EQ(api_.claim_get_count(), gets);  // discovery refused: no claim was asked for
  api_.AnswerNormally("get resource.k8s.io");
  ASSERT_TRUE(WaitFor([&] { return !api_.Slices(kNode).empty(); }, std::chrono::seconds(30)))
      << Log();
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-d", "deep"}}, &out).ok());
  EXPECT_EQ(out["uid-d"].error,
            "claim team/deep: the API server's answer nests arrays and objects deeper than 128 "
            "levels");
  EXPECT_TRUE(agent_->Running()) << Log();
}

TEST_F(DraModeTest, ARestartedAgentUnpreparesWhatItsCheckpointHolds) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok());
  ASSERT_EQ(out["uid-a"].error, "") << Log();
  agent_->Signal(SIGKILL);
  agent_->Wait();
  // The claim is deleted meanwhile: only the checkpoint knows the device.
  api_.DeleteResourceClaim("team", "a");
  const int registrations = kubelet.registrations();
  StartAgent();
  ASSERT_TRUE(
      WaitFor([&] { return kubelet.registrations() > registrations; }, std::chrono::seconds(20)))
      << Log();
  out.clear();
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok());
  EXPECT_EQ(out["uid-a"].error, "") << Log();  // answered from the checkpoint
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}}, &un).ok());
  EXPECT_EQ(un["uid-a"], "");
  EXPECT_FALSE(Exists(SpecPath("uid-a")));
}

// The card in a slot replaced while the agent was down: the same device
// name (its PCI address) now has another UUID. The prepared claim the
// kubelet asks again for is refused, naming both UUIDs, its CDI spec left
// as it was; another claim of the call is prepared; unprepare succeeds.
TEST_F(DraModeTest, AClaimWhoseDeviceHasAnotherGpuAfterARestartIsRefused) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim(
      "team", "b", ClaimJson("b", "uid-b", {{"gpu", kDriver, "gpu-0000-07-00-0-mig-1g-10gb-2-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok());
  ASSERT_EQ(out["uid-a"].error, "") << Log();
  const std::string spec = ReadFile(SpecPath("uid-a"));
  agent_->Signal(SIGTERM);
  ASSERT_EQ(agent_->Wait(), 0) << Log();
  std::string fixture = ReadFile(fixture_);
  const std::string old_uuid = "GPU-bc92a28e-d4f1-504c-a22f-5db7f2725196";
  const std::string new_uuid = "GPU-0d6b5a41-7c3e-4f55-9a61-2b8e0c7f1d23";
  fixture.replace(fixture.find(old_uuid), old_uuid.size(), new_uuid);
  dir_.Write("swapped.yaml", fixture);
  fixture_ = dir_.Join("swapped.yaml");
  const int registrations = kubelet.registrations();
  StartAgent();
  ASSERT_TRUE(
      WaitFor([&] { return kubelet.registrations() > registrations; }, std::chrono::seconds(20)))
      << Log();
  out.clear();
  ASSERT_TRUE(
      kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}, {"team", "uid-b", "b"}}, &out).ok());
  EXPECT_EQ(out["uid-a"].error,
            "claim team/a: device \"gpu-0000-0f-00-0\" was prepared as " + old_uuid +
                " and is now " + new_uuid +
                " (the GPU was replaced or moved since); its containers would get another device "
                "than the one prepared, so the claim is refused and its CDI spec left as it was")
      << Log();
  EXPECT_EQ(ReadFile(SpecPath("uid-a")), spec);
  EXPECT_EQ(out["uid-b"].error, "") << Log();
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}}, &un).ok());
  EXPECT_EQ(un["uid-a"], "");
  EXPECT_FALSE(Exists(SpecPath("uid-a")));
}

// The first update from a version before the handover: the old pod serves
// its registration without a pod UID and publishes, knowing nothing of the
// lock. The new instance registers beside it but publishes only once that
// socket is no longer served (two publishers of one pool would fight).
TEST_F(DraModeTest, AnEarlierVersionStillServingKeepsTheNewInstanceFromPublishing) {
  const std::string plain = dir_.Join("registry") + "/" + kDriver + "-reg.sock";
  const int earlier = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(earlier, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, plain.c_str(), plain.size() + 1);
  ASSERT_EQ(::bind(earlier, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(earlier, 8), 0);
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(
      StartRegistered(kubelet, {{"--dra-pod-uid", "9a2e4b77-5c3d-4f1a-8b62-1e7b2c8f1b02"}}));
  ASSERT_TRUE(WaitFor([&] {
    return Log().find("an instance of an earlier version of the DRA driver still serves") !=
           std::string::npos;
  })) << Log();
  EXPECT_EQ(PublishedDevices(api_).size(), 0u) << Log();
  // The earlier pod exits: its socket goes, and the new one publishes.
  ::close(earlier);
  ::unlink(plain.c_str());
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; }, std::chrono::seconds(20)))
      << Log();
}

// A DaemonSet's rolling update with maxSurge: the new pod's agent starts
// beside the old one's (each names its sockets after its pod UID); the
// kubelet (1.33+) registers both and calls the newest; the new one takes
// over the slices and the health stream and answers from the checkpoint
// they share (a claim the old one prepared, a device it holds); the old
// one exits on SIGTERM unpreparing nothing and leaving the slices.
TEST_F(DraModeTest, ARollingUpdatesNewAgentTakesOverAndTheOldExitsUnpreparingNothing) {
  const std::string old_uid = "6f1d1c35-0b1e-4c8e-9a51-0f6a1d7e0a01";
  const std::string new_uid = "9a2e4b77-5c3d-4f1a-8b62-1e7b2c8f1b02";
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim("team", "b",
                        ClaimJson("b", "uid-b", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim(
      "team", "c", ClaimJson("c", "uid-c", {{"gpu", kDriver, "gpu-0000-07-00-0-mig-1g-10gb-2-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet, {{"--dra-pod-uid", old_uid}}));
  const std::string folder = dir_.Join("plugins") + "/" + kDriver;
  EXPECT_EQ(kubelet.plugin(kDriver)->endpoint, folder + "/dra-" + old_uid + ".sock");
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok());
  ASSERT_EQ(out["uid-a"].error, "") << Log();
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; })) << Log();

  std::unique_ptr<Subprocess> fresh = AgentProcess({{"--dra-pod-uid", new_uid}});
  ASSERT_TRUE(
      WaitFor([&] { return kubelet.plugins(kDriver).size() == 2; }, std::chrono::seconds(20)))
      << fresh->Stderr();
  ASSERT_TRUE(WaitFor([&] {
    return fresh->Stderr().find("this instance publishes") != std::string::npos &&
           Log().find("a newer instance of the DRA driver asks to take over") != std::string::npos;
  })) << Log()
      << fresh->Stderr();
  // Calls go to the newest once its connection is up.
  ASSERT_TRUE(WaitFor(
      [&] { return kubelet.plugin(kDriver)->endpoint == folder + "/dra-" + new_uid + ".sock"; }));
  EXPECT_TRUE(Exists(dir_.Join("registry") + "/" + kDriver + "-" + old_uid + "-reg.sock"));
  EXPECT_TRUE(Exists(dir_.Join("registry") + "/" + kDriver + "-" + new_uid + "-reg.sock"));

  // The new one answers a from the shared checkpoint (no GET), refuses b
  // the device a holds, and prepares c.
  const int gets = api_.claim_get_count();
  out.clear();
  ASSERT_TRUE(kubelet
                  .Prepare(kDriver,
                           {{"team", "uid-a", "a"}, {"team", "uid-b", "b"}, {"team", "uid-c", "c"}},
                           &out)
                  .ok());
  EXPECT_EQ(out["uid-a"].error, "") << fresh->Stderr();
  EXPECT_NE(out["uid-b"].error.find("is already prepared for claim team/a (uid-a)"),
            std::string::npos)
      << out["uid-b"].error;
  EXPECT_EQ(out["uid-c"].error, "") << fresh->Stderr();
  EXPECT_EQ(api_.claim_get_count(), gets + 2);  // b and c only
  EXPECT_NE(fresh->Stderr().find("claim not prepared"), std::string::npos);
  EXPECT_EQ(Log().find("claim not prepared"), std::string::npos);  // the old one was not asked

  // The slices are the new one's to keep: deleted (as a kubelet does),
  // published again.
  api_.DeleteNodeSlices(kNode);
  ASSERT_TRUE(WaitFor([&] { return PublishedDevices(api_).size() == 4; })) << fresh->Stderr();

  // The old one goes: nothing unprepared, the slices left.
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Log();
  EXPECT_FALSE(Exists(dir_.Join("registry") + "/" + kDriver + "-" + old_uid + "-reg.sock"));
  EXPECT_FALSE(Exists(folder + "/dra-" + old_uid + ".sock"));
  EXPECT_TRUE(Exists(folder + "/dra-" + new_uid + ".sock"));
  ASSERT_TRUE(WaitFor([&] { return kubelet.plugins(kDriver).size() == 1; }));
  EXPECT_TRUE(Exists(SpecPath("uid-a")));
  EXPECT_TRUE(Exists(SpecPath("uid-c")));
  EXPECT_EQ(PublishedDevices(api_).size(), 4u);
  // What the old one prepared, the new one unprepares.
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}}, &un).ok());
  EXPECT_EQ(un["uid-a"], "");
  EXPECT_FALSE(Exists(SpecPath("uid-a")));
  EXPECT_TRUE(fresh->Running());
  fresh->Signal(SIGTERM);
  EXPECT_EQ(fresh->Wait(), 0) << fresh->Stderr();
}

// The claim specs in the CDI folder.
std::set<std::string> ClaimSpecs(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find("-claim_") != std::string::npos) out.insert(name);
  }
  return out;
}

TEST_F(DraModeTest, ADroppedKubeletConnectionMidPrepareIsRetriedToTheSameAnswerLeakingNothing) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  api_.PutResourceClaim(
      "team", "b", ClaimJson("b", "uid-b", {{"gpu", kDriver, "gpu-0000-07-00-0-mig-1g-10gb-2-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  std::vector<DraKubelet::Health> health;
  ASSERT_TRUE(kubelet.FirstHealth(kDriver, &health).ok()) << Log();
  // A claim prepared and unprepared first: the agent's connections (the
  // kubelet's, the API server's) are open when its descriptors are counted.
  std::map<std::string, dra::PrepareOutcome> b;
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-b", "b"}}, &b).ok()) << Log();
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-b", "b"}}, &un).ok()) << Log();
  const int fds = CountOpenFds(agent_->pid());
  // The connection breaks while the agent waits on the claim's GET.
  api_.HangClaimGets(true);
  std::map<std::string, dra::PrepareOutcome> first;
  grpc::Status broken;
  std::thread call([&] { broken = kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &first); });
  ASSERT_TRUE(WaitFor([&] { return api_.held_claim_gets() == 1; })) << Log();
  ASSERT_TRUE(kubelet.DropConnection(kDriver));
  call.join();
  EXPECT_EQ(broken.error_code(), grpc::StatusCode::CANCELLED) << broken.error_message();
  EXPECT_EQ(kubelet.dropped_calls(), 1);
  api_.HangClaimGets(false);
  // The kubelet retries on a new connection: answered, and answered the
  // same again.
  std::map<std::string, dra::PrepareOutcome> retry, again;
  ASSERT_TRUE(WaitFor([&] {
    retry.clear();
    return kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &retry).ok();
  })) << Log();
  ASSERT_EQ(retry["uid-a"].error, "") << Log();
  ASSERT_EQ(retry["uid-a"].devices.size(), 1u);
  EXPECT_EQ(retry["uid-a"].devices[0].cdi_ids,
            std::vector<std::string>{"gpu-agent.github.io/claim=uid-a-gpu-0000-0f-00-0"});
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &again).ok());
  ASSERT_EQ(again["uid-a"].devices.size(), 1u);
  EXPECT_EQ(again["uid-a"].devices[0].cdi_ids, retry["uid-a"].devices[0].cdi_ids);
  EXPECT_EQ(ClaimSpecs(dir_.Join("cdi")),
            std::set<std::string>{"gpu-agent.github.io-claim_uid-a.json"});
  // The health stream, then a drop between calls; unprepare on the next
  // connection.
  health.clear();
  ASSERT_TRUE(kubelet.FirstHealth(kDriver, &health).ok()) << Log();
  EXPECT_EQ(health.size(), 4u);
  ASSERT_TRUE(kubelet.DropConnection(kDriver));
  un.clear();
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}}, &un).ok()) << Log();
  EXPECT_EQ(un["uid-a"], "");
  EXPECT_EQ(ClaimSpecs(dir_.Join("cdi")), std::set<std::string>{});
  // The checkpoint's newest record (the slot before it still names the
  // claim).
  EXPECT_EQ(
      ReadSlotted(dir_.Join("plugins") + "/" + kDriver + "/checkpoint.json").record.find("uid-a"),
      std::string::npos);
  // The broken connections are closed at the agent's side too: one open,
  // as before.
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds(agent_->pid()) <= fds; }))
      << CountOpenFds(agent_->pid()) << " fds, " << fds << " before";
  EXPECT_TRUE(agent_->Running());
}

// A claim's GpuConfig asks a time slice: the agent runs the driver root's
// nvidia-smi (a stand-in that records what it is asked) on the claim's GPU
// before it answers; when the tool fails, the claim's error carries what it
// said and no spec is written.
TEST_F(DraModeTest, AGpuConfigsTimeSliceIsSetWithTheDriversNvidiaSmi) {
  const std::string smi = dir_.Join("driver/usr/bin/nvidia-smi");
  std::filesystem::create_directories(dir_.Join("driver/usr/bin"));
  dir_.Write("driver/usr/bin/nvidia-smi",
             "#!/bin/sh\n"
             "echo \"$*\" >> " +
                 dir_.Join("smi.args") +
                 "\n"
                 "if [ -e " +
                 dir_.Join("smi.fail") +
                 " ]; then\n"
                 "  echo 'Unable to set the compute policy: Insufficient Permissions' >&2; exit 4\n"
                 "fi\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);
  auto with_config = [](std::string json, const std::string& interval) {
    const std::string config =
        std::string(R"("config":[{"source":"FromClaim","opaque":{"driver":")") + kDriver +
        R"(","parameters":{"apiVersion":")" + kDriver +
        R"(/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":")" +
        interval + R"("}}}}}],)";
    return json.insert(json.find(R"("results":[)"), config);
  };
  api_.PutResourceClaim(
      "team", "a",
      with_config(ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}), "Short"));
  // b shares a's GPU: admin access.
  api_.PutResourceClaim(
      "team", "b",
      with_config(WithResultFields(ClaimJson("b", "uid-b", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}),
                                   R"("adminAccess":true)"),
                  "Long"));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok()) << Log();
  ASSERT_EQ(out["uid-a"].error, "") << Log();
  EXPECT_EQ(ReadFile(dir_.Join("smi.args")),
            "compute-policy -i GPU-bc92a28e-d4f1-504c-a22f-5db7f2725196 --set-timeslice=1\n");
  dir_.Write("smi.fail", "");
  out.clear();
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-b", "b"}}, &out).ok()) << Log();
  EXPECT_NE(out["uid-b"].error.find("to Long: " + smi +
                                    " compute-policy failed (exit code 4): Unable to set the "
                                    "compute policy: Insufficient Permissions"),
            std::string::npos)
      << out["uid-b"].error;
  EXPECT_TRUE(Exists(SpecPath("uid-a")));
  EXPECT_FALSE(Exists(SpecPath("uid-b")));
  // The claim that set it unprepared (after uid-b's refused try for Long):
  // Default (0) again.
  std::filesystem::remove(dir_.Join("smi.fail"));
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}}, &un).ok()) << Log();
  EXPECT_EQ(un["uid-a"], "");
  EXPECT_EQ(ReadFile(dir_.Join("smi.args")),
            "compute-policy -i GPU-bc92a28e-d4f1-504c-a22f-5db7f2725196 --set-timeslice=1\n"
            "compute-policy -i GPU-bc92a28e-d4f1-504c-a22f-5db7f2725196 --set-timeslice=3\n"
            "compute-policy -i GPU-bc92a28e-d4f1-504c-a22f-5db7f2725196 --set-timeslice=0\n");
  EXPECT_TRUE(agent_->Running());
}

// sharing.timeSlicing carried into DRA: on a server that keeps consumable
// capacity, the time-sliced GPU is published once with 4 shares, and the
// claims the scheduler gives shares of it (each result with its shareID)
// are prepared side by side, each answered with its share; a claim past
// its shares is refused. On a server that drops consumable capacity the
// agent says so and the GPU is published whole.
TEST_F(DraModeTest, ATimeSlicedGpuIsPublishedOnceAndItsSharesPrepareSideBySide) {
  dir_.Write("config.yaml",
             "version: v1\n"
             "sharing:\n"
             "  timeSlicing:\n"
             "    resources:\n"
             "    - name: nvidia.com/gpu\n"
             "      replicas: 4\n");
  const std::string gpu = "gpu-0000-0f-00-0";
  auto share = [&](const std::string& name, const std::string& shares) {
    const std::string uid = "uid-" + name;
    api_.PutResourceClaim(
        "team", name,
        WithResultFields(ClaimJson(name, uid, {{"gpu", kDriver, gpu}}),
                         R"("shareID":"share-)" + name + R"(","consumedCapacity":{"shares":")" +
                             shares + R"("})"));
  };
  share("a", "1");
  share("b", "2");
  share("c", "2");
  api_.ServeConsumableCapacity(true);
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet, {{"--config", dir_.Join("config.yaml")}}));
  // Published once, shared.
  auto published = [&] {
    for (const std::string& slice : api_.Slices(kNode)) {
      rapidjson::Document d;
      d.Parse(slice.c_str());
      if (d.HasParseError()) continue;
      for (const auto& dev : d["spec"]["devices"].GetArray()) {
        if (dev["name"].GetString() == gpu) {
          const bool shared = dev.HasMember("allowMultipleAllocations") &&
                              dev["allowMultipleAllocations"].GetBool();
          const std::string shares = dev["capacity"].HasMember("shares")
                                         ? dev["capacity"]["shares"]["value"].GetString()
                                         : "";
          return std::string(shared ? "shared " : "whole ") + shares;
        }
      }
    }
    return std::string();
  };
  ASSERT_TRUE(WaitFor([&] { return published() == "shared 4"; }, std::chrono::seconds(20)))
      << published() << Log();
  EXPECT_NE(Log().find("the API server keeps consumable capacity"), std::string::npos) << Log();
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}, {"team", "uid-b", "b"}}, &out).ok())
      << Log();
  ASSERT_EQ(out["uid-a"].error, "") << Log();
  ASSERT_EQ(out["uid-b"].error, "") << Log();
  ASSERT_EQ(out["uid-a"].devices.size(), 1u);
  EXPECT_EQ(out["uid-a"].devices[0].share_id, "share-a");
  EXPECT_EQ(out["uid-b"].devices[0].share_id, "share-b");
  EXPECT_EQ(out["uid-a"].devices[0].cdi_ids,
            std::vector<std::string>{"gpu-agent.github.io/claim=uid-a-" + gpu + "_share-a"});
  EXPECT_EQ(SpecDeviceNames(SpecPath("uid-b")), std::set<std::string>{"uid-b-" + gpu + "_share-b"});
  out.clear();
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-c", "c"}}, &out).ok()) << Log();
  EXPECT_NE(out["uid-c"].error.find("has 4 shares; claim team/a (uid-a), claim team/b (uid-b) "
                                    "hold 3, this claim asks 2"),
            std::string::npos)
      << out["uid-c"].error;
  EXPECT_FALSE(Exists(SpecPath("uid-c")));
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}}, &un).ok()) << Log();
  out.clear();
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-c", "c"}}, &out).ok()) << Log();
  EXPECT_EQ(out["uid-c"].error, "") << Log();
  // The agent restarted, the server keeping consumable capacity or not, the
  // config sharing or not: the slices are published as `want`, the stored
  // form (left from before) written over.
  auto restart = [&](bool consumable, bool sharing, const std::string& want) {
    agent_->Signal(SIGTERM);
    EXPECT_EQ(agent_->Wait(), 0) << Log();
    api_.ServeConsumableCapacity(consumable);
    StartAgent(sharing ? std::map<std::string, std::string>{{"--config", dir_.Join("config.yaml")}}
                       : std::map<std::string, std::string>{});
    return WaitFor([&] { return published() == want; }, std::chrono::seconds(20));
  };
  ASSERT_TRUE(restart(false, true, "whole ")) << published() << Log();
  EXPECT_NE(Log().find("the API server drops consumable capacity (feature gate "
                       "DRAConsumableCapacity off); time-sliced devices are published whole"),
            std::string::npos)
      << Log();
  // Sharing on again, then turned off in the config: the slice loses it.
  ASSERT_TRUE(restart(true, true, "shared 4")) << published() << Log();
  ASSERT_TRUE(restart(true, false, "whole ")) << published() << Log();
}

// A prioritized-list claim (firstAvailable), as a 1.34+ scheduler
// allocates it: the result names "gpu/whole"; the container that asks for
// request "gpu" gets the GPU (the kubelet matches request names exactly),
// and the GpuConfig naming "gpu" is set on it.
TEST_F(DraModeTest, AFirstAvailableClaimsContainerGetsItsGpuAndItsConfig) {
  const std::string smi = dir_.Join("driver/usr/bin/nvidia-smi");
  std::filesystem::create_directories(dir_.Join("driver/usr/bin"));
  dir_.Write("driver/usr/bin/nvidia-smi",
             "#!/bin/sh\necho \"$*\" >> " + dir_.Join("smi.args") + "\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);
  auto claim = [](const std::string& name, const std::string& uid, const std::string& config) {
    return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")" +
           name + R"(","namespace":"team","uid":")" + uid +
           R"("},"spec":{"devices":{"requests":[{"name":"gpu","firstAvailable":[{"name":"mig","deviceClassName":"mig.gpu.gpu-agent.github.io"},{"name":"whole","deviceClassName":"gpu.gpu-agent.github.io"}]}]}},"status":{"allocation":{"devices":{)" +
           config + R"("results":[{"request":"gpu/whole","driver":")" + kDriver + R"(","pool":")" +
           kNode + R"(","device":"gpu-0000-0f-00-0"}]}}}})";
  };
  api_.PutResourceClaim("team", "plain", claim("plain", "uid-plain", ""));
  api_.PutResourceClaim(
      "team", "configured",
      claim(
          "configured", "uid-conf",
          std::string(
              R"("config":[{"source":"FromClaim","requests":["gpu"],"opaque":{"driver":")") +
              kDriver + R"(","parameters":{"apiVersion":")" + kDriver +
              R"(/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}}}],)"));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-plain", "plain"}}, &out).ok()) << Log();
  ASSERT_EQ(out["uid-plain"].error, "") << Log();
  EXPECT_EQ(DraKubelet::ContainerCdiIds(out["uid-plain"], "gpu"),
            std::vector<std::string>{"gpu-agent.github.io/claim=uid-plain-gpu-0000-0f-00-0"});
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-plain", "plain"}}, &un).ok()) << Log();
  EXPECT_FALSE(Exists(dir_.Join("smi.args")));  // no config, nothing set

  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"team", "uid-conf", "configured"}}, &out).ok()) << Log();
  ASSERT_EQ(out["uid-conf"].error, "") << Log();
  EXPECT_EQ(DraKubelet::ContainerCdiIds(out["uid-conf"], "gpu"),
            std::vector<std::string>{"gpu-agent.github.io/claim=uid-conf-gpu-0000-0f-00-0"});
  EXPECT_EQ(ReadFile(dir_.Join("smi.args")),
            "compute-policy -i GPU-bc92a28e-d4f1-504c-a22f-5db7f2725196 --set-timeslice=3\n");
}

TEST_F(DraModeTest, RemovedSocketFoldersAreMadeAgainAndServed) {
  api_.PutResourceClaim("team", "a",
                        ClaimJson("a", "uid-a", {{"gpu", kDriver, "gpu-0000-0f-00-0"}}));
  DraKubelet kubelet(KubeletOptions());
  ASSERT_NO_FATAL_FAILURE(StartRegistered(kubelet));
  const std::string folder = dir_.Join("plugins") + "/" + kDriver;
  const std::string registry = dir_.Join("registry");
  std::error_code ec;
  // The plugin's folder (dra.sock and the checkpoint in it) removed, as a
  // wipe of the kubelet's folders does.
  std::filesystem::rename(folder, dir_.Join("removed-plugin"), ec);
  ASSERT_FALSE(ec) << ec.message();
  std::filesystem::remove_all(dir_.Join("removed-plugin"));
  // Deadlines of 30 s: under a sanitizer on a loaded runner, the socket
  // watch, the new server and the kubelet's retry take seconds.
  constexpr std::chrono::seconds kSlow(30);
  ASSERT_TRUE(WaitFor([&] { return Exists(folder + "/dra.sock"); }, kSlow)) << Log();
  EXPECT_NE(Log().find("a DRA socket folder is gone; making it again"), std::string::npos) << Log();
  // The kubelet's next call finds the socket at the endpoint it knows.
  std::map<std::string, dra::PrepareOutcome> out;
  ASSERT_TRUE(WaitFor(
      [&] {
        out.clear();
        return kubelet.Prepare(kDriver, {{"team", "uid-a", "a"}}, &out).ok();
      },
      kSlow))
      << Log();
  EXPECT_EQ(out["uid-a"].error, "") << Log();
  EXPECT_NE(ReadSlotted(folder + "/checkpoint.json").record.find("uid-a"), std::string::npos);
  // The registry folder removed: made again with the registration socket in
  // it, which the kubelet registers when it watches the folder again.
  const int registrations = kubelet.registrations();
  std::filesystem::rename(registry, dir_.Join("removed-registry"), ec);
  ASSERT_FALSE(ec) << ec.message();
  std::filesystem::remove_all(dir_.Join("removed-registry"));
  ASSERT_TRUE(WaitFor([&] { return Exists(registry + "/" + kDriver + "-reg.sock"); }, kSlow))
      << Log();
  ASSERT_TRUE(kubelet.Restart());
  ASSERT_TRUE(WaitFor([&] { return kubelet.registrations() > registrations; }, kSlow)) << Log();
  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"team", "uid-a", "a"}}, &un).ok()) << Log();
  EXPECT_EQ(un["uid-a"], "");
  EXPECT_FALSE(Exists(SpecPath("uid-a")));
  EXPECT_TRUE(agent_->Running());
}

}  // namespace
}  // namespace gpu_agent::testing
