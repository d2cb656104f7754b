// Plugin mode end to end: the real gpu-agent binary, the kubelet simulator
// on real unix sockets, and the NVML stand-in driven through its FIFO.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>
#include <regex>
#include <set>

#include "base/strings.h"
#include "deviceplugin/kubelet_client.h"
#include "fixture.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

using Devices = std::vector<v1beta1::Device>;
constexpr const char* kGpu = "nvidia.com/gpu";

std::vector<std::string> FixtureUuids(const std::string& fixture) {
  fake_nvml::Fixture fx;
  std::string error;
  EXPECT_TRUE(fake_nvml::LoadFixture(fixture, &fx, &error)) << error;
  std::vector<std::string> out;
  for (const auto& g : fx.gpus) out.push_back(g.uuid);
  return out;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

int CountHealthy(const Devices& d) {
  int n = 0;
  for (const auto& x : d) n += x.health() == "Healthy";
  return n;
}

class PluginModeTest : public ::testing::Test {
 protected:
  PluginModeTest() : sim_(dir_.path()) {}

  void SetUp() override {
    ASSERT_TRUE(WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir_.Join("sys")));
  }

  // Starts the agent (and, unless told not to, the simulator first).
  void StartAgent(std::vector<std::string> extra = {},
                  const std::string& fixture = FixturePath("8-gpu-nvlink.yaml"),
                  std::map<std::string, std::string> env = {}, bool start_sim = true) {
    if (start_sim) {
      ASSERT_TRUE(sim_.Start());
    }
    std::vector<std::string> args = {BinaryPath(),
                                     "run",
                                     "--kubelet-socket",
                                     sim_.socket(),
                                     "--sysfs-root",
                                     dir_.Join("sys"),
                                     "--health-recovery-period",
                                     "300ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto full_env = FakeNvmlEnv(fixture);
    full_env["FAKE_NVML_CONTROL"] = Ctl();
    for (auto& [k, v] : env) full_env[k] = v;
    agent_ = std::make_unique<Subprocess>(args, full_env);
  }

  std::string Ctl() const { return dir_.Join("nvml.ctl"); }
  void Nvml(const std::string& cmd) {
    ASSERT_TRUE(WaitFor([&] { return Exists(Ctl()); }));
    ASSERT_TRUE(WriteFifo(Ctl(), cmd)) << cmd;
  }

  bool Registered(int count = 1) { return sim_.WaitForRegistrations(count); }

  std::string Dump() { return agent_ ? agent_->Stderr() : ""; }

  TempDir dir_;
  KubeletSimulator sim_;
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(PluginModeTest, RegistersAndStreamsTheFixture) {
  StartAgent();
  ASSERT_TRUE(Registered()) << Dump();
  const auto req = sim_.registration_requests().at(0);
  EXPECT_EQ(req.version(), "v1beta1");
  EXPECT_EQ(req.endpoint(), "nvidia-gpu.sock");
  EXPECT_EQ(req.resource_name(), kGpu);
  EXPECT_TRUE(req.options().get_preferred_allocation_available());
  EXPECT_FALSE(req.options().pre_start_required());
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  const Devices devices = sim_.Devices(kGpu);
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(devices[i].id(), uuids[i]);
    EXPECT_EQ(devices[i].health(), "Healthy");
    ASSERT_EQ(devices[i].topology().nodes_size(), 1);
    EXPECT_EQ(devices[i].topology().nodes(0).id(), i < 4 ? 0 : 1);
  }
  v1beta1::DevicePluginOptions opts;
  ASSERT_TRUE(sim_.GetDevicePluginOptions(kGpu, &opts).ok());
  EXPECT_TRUE(opts.get_preferred_allocation_available());
  EXPECT_FALSE(opts.pre_start_required());
  v1beta1::PreStartContainerRequest pre;
  pre.add_devices_ids(uuids[0]);
  EXPECT_TRUE(sim_.PreStartContainer(kGpu, pre).ok());
}

TEST_F(PluginModeTest, XidTakesGpuAndItsReplicasOutUntilTheGpuIsReset) {
  const std::string config = dir_.Write("ts.yaml", R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
)");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 16; })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  Nvml("xid 1 13");  // an application error: ignored by default
  Nvml("xid 3 79");  // fallen off the bus
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 14; }))
      << Dump();
  for (const auto& d : sim_.Devices(kGpu)) {
    const bool gpu3 = d.id().rfind(uuids[3] + "::", 0) == 0;
    EXPECT_EQ(d.health(), gpu3 ? "Unhealthy" : "Healthy") << d.id();
  }
  // Off the bus needs a reset: quiet periods (300 ms) pass, GPU 3 stays out.
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) == 16; }, std::chrono::seconds(1)));
  Nvml("reset 3");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 16; }))
      << Dump();
  // XID 13 on GPU 1 never showed in any update.
  for (const auto& u : sim_.Updates(kGpu)) {
    for (const auto& d : u.devices) {
      if (d.id().rfind(uuids[1], 0) == 0) {
        EXPECT_EQ(d.health(), "Healthy");
      }
    }
  }
}

TEST_F(PluginModeTest, LostGpuStaysUnhealthyUntilItIsReset) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  Nvml("lose 6");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 7; }));
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) == 8; },
      std::chrono::milliseconds(1000)));
  Nvml("reset 6");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }));
}

TEST_F(PluginModeTest, HealthChecksDisabledByNvidiaEnvVar) {
  StartAgent({}, FixturePath("8-gpu-nvlink.yaml"), {{"DP_DISABLE_HEALTHCHECKS", "all"}});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  ASSERT_TRUE(agent_->WaitForStderr("health checks are disabled"));
  Nvml("xid 0 79");
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) < 8; }, std::chrono::milliseconds(500)));
}

TEST_F(PluginModeTest, KubeletRestartsAreFollowedWithoutLeaks) {
  StartAgent();
  ASSERT_TRUE(Registered(1));
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  // Ten restarts to warm up what gRPC creates lazily (its thread pool grows
  // under load and shrinks only when idle for long).
  int expected_registrations = 1;
  auto restart = [&](int i) {
    const auto started = std::chrono::steady_clock::now();
    ASSERT_TRUE(sim_.Restart());
    ASSERT_TRUE(Registered(++expected_registrations)) << "restart " << i << "\n" << Dump();
    ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  };
  for (int i = 0; i < 10; ++i) restart(i);
  const int fds = CountOpenFds(agent_->pid());
  const int threads = CountThreads(agent_->pid());
  for (int i = 0; i < 100; ++i) restart(i);
  ASSERT_TRUE(Exists(dir_.Join("nvidia-gpu.sock")));
  // A leak grows with every restart (+100 after 100 restarts); allow the
  // pool's own growth of a few.
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds(agent_->pid()) <= fds + 4; }))
      << "fds before " << fds << ", after " << CountOpenFds(agent_->pid());
  EXPECT_TRUE(WaitFor([&] { return CountThreads(agent_->pid()) <= threads + 4; }))
      << "threads before " << threads << ", after " << CountThreads(agent_->pid());
  std::printf("after 100 kubelet restarts: fds %d -> %d, threads %d -> %d\n", fds,
              CountOpenFds(agent_->pid()), threads, CountThreads(agent_->pid()));
}

TEST_F(PluginModeTest, RemovedPluginSocketIsServedAgain) {
  StartAgent();
  ASSERT_TRUE(Registered(1));
  ASSERT_EQ(::unlink(dir_.Join("nvidia-gpu.sock").c_str()), 0);
  ASSERT_TRUE(Registered(2)) << Dump();
  EXPECT_TRUE(Exists(dir_.Join("nvidia-gpu.sock")));
}

struct AllocCase {
  const char* name;
  std::vector<std::string> flags;
  std::string expected;  // text format of the container response
};

void PrintTo(const AllocCase& c, std::ostream* os) { *os << c.name; }

class AllocateStrategyTest : public PluginModeTest,
                             public ::testing::WithParamInterface<AllocCase> {};

TEST_P(AllocateStrategyTest, ExactResponse) {
  dir_.Write("devroot/dev/nvidiactl", "");
  dir_.Write("devroot/dev/nvidia-uvm", "");
  // Every GPU's node: the CDI spec (written with a cdi-* strategy) names
  // them all; Allocate's device specs only those asked for.
  for (int i = 0; i < 8; ++i) dir_.Write(StrCat("devroot/dev/nvidia", i), "");
  ASSERT_TRUE(WriteFakeDriverRoot(dir_.Join("driver"), "550.54.15"));
  std::vector<std::string> flags = {
      "--device-id-strategy", "index",          "--dev-root",           dir_.Join("devroot"),
      "--cdi-spec-dir",       dir_.Join("cdi"), "--nvidia-driver-root", dir_.Join("driver")};
  flags.insert(flags.end(), GetParam().flags.begin(), GetParam().flags.end());
  StartAgent(flags);
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  c->add_devices_ids("5");
  c->add_devices_ids("2");
  req.add_container_requests()->add_devices_ids("0");
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kGpu, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 2);
  std::string expected = GetParam().expected;
  size_t pos;
  while ((pos = expected.find("ROOT")) != std::string::npos) {
    expected.replace(pos, 4, dir_.Join("devroot"));
  }
  // CDI annotation keys end in a per-response id: "_ID" in the expectation.
  const std::string got =
      std::regex_replace(resp.container_responses(0).ShortDebugString(),
                         std::regex("(gpu-agent_gpu)_[0-9a-f]{16}\""), "$1_ID\"");
  EXPECT_EQ(got, expected);
  EXPECT_EQ(resp.container_responses(1).envs().size(), resp.container_responses(0).envs().size());
}

INSTANTIATE_TEST_SUITE_P(
    All, AllocateStrategyTest,
    ::testing::Values(
        AllocCase{"Envvar", {}, R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "5,2" })"},
        AllocCase{
            "VolumeMounts",
            {"--device-list-strategy", "volume-mounts"},
            R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "/var/run/nvidia-container-devices" } )"
            R"(mounts { container_path: "/var/run/nvidia-container-devices/5" host_path: "/dev/null" } )"
            R"(mounts { container_path: "/var/run/nvidia-container-devices/2" host_path: "/dev/null" })"},
        AllocCase{
            "CdiAnnotations",
            {"--device-list-strategy", "cdi-annotations"},
            R"(annotations { key: "cdi.k8s.io/gpu-agent_gpu_ID" value: "gpu-agent.github.io/gpu=5,gpu-agent.github.io/gpu=2" })"},
        AllocCase{
            "CdiCri",
            {"--device-list-strategy", "cdi-cri"},
            R"(cdi_devices { name: "gpu-agent.github.io/gpu=5" } cdi_devices { name: "gpu-agent.github.io/gpu=2" })"},
        AllocCase{
            "EnvvarCdiCriAndDeviceSpecs",
            {"--device-list-strategy", "envvar,cdi-cri", "--pass-device-specs"},
            R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: "5,2" } )"
            R"(devices { container_path: "/dev/nvidiactl" host_path: "ROOT/dev/nvidiactl" permissions: "rw" } )"
            R"(devices { container_path: "/dev/nvidia-uvm" host_path: "ROOT/dev/nvidia-uvm" permissions: "rw" } )"
            R"(devices { container_path: "/dev/nvidia5" host_path: "ROOT/dev/nvidia5" permissions: "rw" } )"
            R"(devices { container_path: "/dev/nvidia2" host_path: "ROOT/dev/nvidia2" permissions: "rw" } )"
            R"(cdi_devices { name: "gpu-agent.github.io/gpu=5" } cdi_devices { name: "gpu-agent.github.io/gpu=2" })"}),
    [](const ::testing::TestParamInfo<AllocCase>& p) { return p.param.name; });

TEST_F(PluginModeTest, BadAllocateRequestsAreRefusedWithTheIds) {
  const std::string config = dir_.Write("ts.yaml", R"(version: v1
sharing:
  timeSlicing:
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
)");
  StartAgent({"--config", config, "--device-id-strategy", "index"});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 32; }));
  Nvml("xid 7 79");
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 28; }));
  struct Case {
    std::vector<std::string> ids;
    std::string expect;
  } cases[] = {
      {{}, "names no device IDs"},
      {{"99::0"}, "unknown device IDs \"99::0\""},
      {{"7::1"}, "unhealthy device IDs \"7::1\""},
      {{"1::1", "1::1"}, "refused: sharing.timeSlicing.failRequestsGreaterThanOne"},
      {{"0::0", "1::0"}, "refused: sharing.timeSlicing.failRequestsGreaterThanOne"},
  };
  for (const Case& c : cases) {
    v1beta1::AllocateRequest req;
    auto* cr = req.add_container_requests();
    for (const auto& id : c.ids) cr->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::Status s = sim_.Allocate(kGpu, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.expect;
    EXPECT_NE(s.error_message().find(c.expect), std::string::npos) << s.error_message();
  }
  // 10,000 IDs in one request: refused with a short message, daemon fine.
  v1beta1::AllocateRequest big;
  auto* cr = big.add_container_requests();
  for (int i = 0; i < 10000; ++i) cr->add_devices_ids("id-" + std::to_string(i));
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kGpu, big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), 600u);
  v1beta1::AllocateRequest ok;
  ok.add_container_requests()->add_devices_ids("3::2");
  EXPECT_TRUE(sim_.Allocate(kGpu, ok, &resp).ok());
}

TEST_F(PluginModeTest, SixteenClientsAllocateAtOnce) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 16; ++t) {
    clients.emplace_back([&, t] {
      auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
          "unix://" + dir_.Join("nvidia-gpu.sock"), grpc::InsecureChannelCredentials()));
      for (int i = 0; i < 50; ++i) {
        v1beta1::AllocateRequest req;
        req.add_container_requests()->add_devices_ids(uuids[static_cast<size_t>((t + i) % 8)]);
        v1beta1::AllocateResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        grpc::Status s = stub->Allocate(&ctx, req, &resp);
        if (s.ok() && resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES") ==
                          uuids[static_cast<size_t>((t + i) % 8)]) {
          ++ok;
        } else {
          ++bad;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 800);
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(PluginModeTest, PreferredAllocationUsesNvlinkTopology) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& u : uuids) c->add_available_deviceids(u);
  c->add_must_include_deviceids(uuids[4]);
  c->set_allocation_size(2);
  auto* c2 = req.add_container_requests();
  for (const auto& u : uuids) c2->add_available_deviceids(u);
  c2->set_allocation_size(4);
  v1beta1::PreferredAllocationResponse resp;
  grpc::Status s = sim_.GetPreferredAllocation(kGpu, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 2);
  // GPU 4's double NVLinks go to GPUs 0 and 7; 0 comes first.
  EXPECT_EQ(std::vector<std::string>(resp.container_responses(0).deviceids().begin(),
                                     resp.container_responses(0).deviceids().end()),
            (std::vector<std::string>{uuids[4], uuids[0]}));
  EXPECT_EQ(std::set<std::string>(resp.container_responses(1).deviceids().begin(),
                                  resp.container_responses(1).deviceids().end()),
            (std::set<std::string>{uuids[0], uuids[1], uuids[2], uuids[3]}));

  v1beta1::PreferredAllocationRequest too_many;
  auto* t = too_many.add_container_requests();
  t->add_available_deviceids(uuids[0]);
  t->set_allocation_size(2);
  s = sim_.GetPreferredAllocation(kGpu, too_many, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("more than the 1 available"), std::string::npos);
  v1beta1::PreferredAllocationRequest unknown;
  auto* u = unknown.add_container_requests();
  u->add_available_deviceids(uuids[0]);
  u->add_must_include_deviceids("GPU-nope");
  u->set_allocation_size(1);
  s = sim_.GetPreferredAllocation(kGpu, unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("\"GPU-nope\""), std::string::npos) << s.error_message();
}

TEST_F(PluginModeTest, GarbageBytesOnThePluginSocketAreHarmless) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  for (int i = 0; i < 20; ++i) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = dir_.Join("nvidia-gpu.sock");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string junk = i % 2 ? "GET / HTTP/1.1\r\n\r\n" : std::string(4096, '\xff');
    (void)!::write(fd, junk.data(), junk.size());
    ::close(fd);
  }
  v1beta1::DevicePluginOptions opts;
  EXPECT_TRUE(sim_.GetDevicePluginOptions(kGpu, &opts).ok());
  EXPECT_TRUE(agent_->Running());
  EXPECT_EQ(sim_.registrations(), 1);
}

// A request gRPC cannot parse (a string field that is not UTF-8) is refused,
// and what protobuf says of it reaches stderr as one of the agent's own JSON
// lines, not as protobuf's text: every line stays valid JSON.
TEST_F(PluginModeTest, LibraryLogLinesKeepTheAgentsJsonFormat) {
  StartAgent({"--log-format", "json"});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  v1beta1::AllocateRequest bad;
  bad.add_container_requests()->add_devices_ids("GPU-\xff\xfe");
  v1beta1::AllocateResponse resp;
  const grpc::Status s = sim_.Allocate(kGpu, bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();  // not parsed
  ASSERT_TRUE(agent_->WaitForStderr("\"source\":\"protobuf\"")) << Dump();
  v1beta1::AllocateRequest ok;
  ok.add_container_requests()->add_devices_ids(FixtureUuids(FixturePath("8-gpu-nvlink.yaml"))[0]);
  EXPECT_TRUE(sim_.Allocate(kGpu, ok, &resp).ok());
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Dump();
  int protobuf_lines = 0;
  const std::string err = agent_->Stderr();
  for (std::string_view piece : StrSplit(err, '\n')) {
    if (piece.empty()) continue;
    const std::string line(piece);
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseValidateEncodingFlag>(line.c_str());
    ASSERT_FALSE(doc.HasParseError()) << line;
    ASSERT_TRUE(doc.IsObject()) << line;
    if (doc.HasMember("source") && std::string(doc["source"].GetString()) == "protobuf") {
      ++protobuf_lines;
      EXPECT_EQ(std::string(doc["level"].GetString()), "error") << line;
      EXPECT_NE(std::string(doc["msg"].GetString()).find("invalid UTF-8"), std::string::npos)
          << line;
    }
  }
  EXPECT_EQ(protobuf_lines, 1) << Dump();
}

TEST_F(PluginModeTest, SigtermFinishesCleanly) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  ASSERT_TRUE(Exists(dir_.Join("nvidia-gpu.sock")));
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Dump();
  EXPECT_FALSE(Exists(dir_.Join("nvidia-gpu.sock")));
  EXPECT_NE(agent_->Stderr().find("shutting down signal=SIGTERM"), std::string::npos);
}

TEST_F(PluginModeTest, SigintFinishesCleanly) {
  StartAgent();
  ASSERT_TRUE(Registered());
  agent_->Signal(SIGINT);
  EXPECT_EQ(agent_->Wait(), 0) << Dump();
  EXPECT_FALSE(Exists(dir_.Join("nvidia-gpu.sock")));
}

TEST_F(PluginModeTest, SighupReloadsConfigAndReRegisters) {
  const std::string config = dir_.Write("c.yaml", "version: v1\n");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; }));
  dir_.Write("c.yaml", R"(version: v1
flags:
  plugin:
    deviceIDStrategy: index
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 3
)");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(Registered(2)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) {
    return d.size() == 24 && d[0].id() == "0::0" && d[23].id() == "7::2";
  })) << Dump();
  // A broken config on SIGHUP keeps the running one.
  dir_.Write("c.yaml", "version: v1\nflags:\n  migStrategy: bogus\n");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(agent_->WaitForStderr("config reload failed; keeping the running config"));
  EXPECT_TRUE(agent_->Running());
  EXPECT_EQ(sim_.Devices(kGpu).size(), 24u);
}

// A GPU off the bus answers GPU_IS_LOST even for its handle, so a reload's
// re-discovery cannot read its UUID: it stays advertised (unhealthy) as it
// was known, and comes back when it is reset (found by the soak: it used to
// leave the node until the agent restarted).
TEST_F(PluginModeTest, GpuOffTheBusStaysAdvertisedAcrossAReloadAndReturnsWhenReset) {
  const std::string config = dir_.Write("c.yaml", "version: v1\n");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
  Nvml("xid 3 79");
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 7, std::chrono::seconds(10))) << Dump();
  const int before = sim_.registrations();
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(sim_.WaitForRegistrations(before + 1)) << Dump();
  ASSERT_TRUE(sim_.WaitForOldClientsDone(std::chrono::seconds(10)));
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) {
    return d.size() == 8 && CountHealthy(d) == 7;
  })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  for (const auto& d : sim_.Devices(kGpu)) {
    EXPECT_EQ(d.health(), d.id() == uuids[3] ? "Unhealthy" : "Healthy") << d.id();
  }
  Nvml("reset 3");
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
}

// A GPU that needs a reset stays out across a SIGHUP reload (the new
// generation starts with it out), and SIGUSR1, an operator's word, brings
// back what NVML cannot show was reset.
TEST_F(PluginModeTest, GpuNeedingAResetStaysOutAcrossAReloadUntilAnOperatorVouches) {
  const std::string config = dir_.Write("c.yaml", "version: v1\n");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }))
      << Dump();
  Nvml("xid 2 48");  // double-bit ECC: NVML answers, a row remap is pending
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 7; }))
      << Dump();
  // A probe found it answering but still needing the reset.
  ASSERT_TRUE(agent_->WaitForStderr("still needs a reset")) << Dump();
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(Registered(2)) << Dump();
  ASSERT_TRUE(agent_->WaitForStderr("reload done")) << Dump();
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }, std::chrono::seconds(1)))
      << "the reload brought back a GPU that needs a reset\n"
      << Dump();
  EXPECT_EQ(CountHealthy(sim_.Devices(kGpu)), 7);
  // GPU 5's NVML shows no sign of a reset either way.
  for (const char* fn : {"nvmlDeviceGetFieldValues", "nvmlDeviceGetRemappedRows",
                         "nvmlDeviceGetRetiredPagesPendingStatus"}) {
    Nvml(std::string("fail 5 ") + fn + " 3");
  }
  Nvml("xid 5 74");  // NVLink error
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 6; }))
      << Dump();
  agent_->Signal(SIGUSR1);
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return CountHealthy(d) == 8; }))
      << Dump();
  EXPECT_NE(Dump().find("an operator vouched for it (SIGUSR1)"), std::string::npos) << Dump();
  EXPECT_TRUE(agent_->Running());
}

// As the no-runtime-hook DaemonSet runs it: the host's root mounted at
// CONTAINER_DRIVER_ROOT, NVIDIA_DRIVER_ROOT the host's view. NVML is found
// under the mount; Allocate names the host's paths.
TEST_F(PluginModeTest, ContainerDriverRootFindsNvmlAndAllocateNamesHostPaths) {
  TempDir host;  // the host's "/" as the container sees it
  std::filesystem::create_directories(host.Join("usr/lib64"));
  std::filesystem::create_symlink(FakeNvmlDir() + "/libnvidia-ml.so.1",
                                  host.Join("usr/lib64/libnvidia-ml.so.1"));
  host.Write("dev/nvidiactl", "");
  host.Write("dev/nvidia-uvm", "");
  host.Write("dev/nvidia3", "");
  StartAgent({"--pass-device-specs"}, FixturePath("8-gpu-nvlink.yaml"),
             {{"LD_LIBRARY_PATH", kUnset},
              {"NVIDIA_DRIVER_ROOT", "/"},
              {"CONTAINER_DRIVER_ROOT", host.path()}});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(uuids[3]);
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kGpu, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<std::string> host_paths;
  for (const auto& d : resp.container_responses(0).devices()) host_paths.push_back(d.host_path());
  EXPECT_EQ(host_paths,
            (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia3"}));
}

// /healthz asks the plugin's own gRPC server, as the kubelet would; a socket
// nothing serves is named.
TEST(ProbePluginTest, ASocketNothingServesIsNamed) {
  TempDir dir;
  absl::Status s = deviceplugin::ProbePlugin(dir.Join("none.sock"), std::chrono::seconds(1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find(dir.Join("none.sock")), std::string::npos) << s;
}

TEST_F(PluginModeTest, WaitsForAMissingKubeletWithoutSpinning) {
  StartAgent({}, FixturePath("8-gpu-nvlink.yaml"), {}, /*start_sim=*/false);
  ASSERT_TRUE(agent_->WaitForStderr("waiting for the kubelet")) << Dump();
  const long ticks = CpuTicks(agent_->pid());
  // Over a second and a half of waiting the agent may retry a few times;
  // a spinning loop would burn ~150 ticks.
  MeasurementWindow(std::chrono::milliseconds(1500));
  EXPECT_LT(CpuTicks(agent_->pid()) - ticks, 10);
  // The kubelet arrives: inotify sees kubelet.sock, registration follows.
  ASSERT_TRUE(sim_.Start());
  ASSERT_TRUE(sim_.WaitForRegistrations(1, std::chrono::seconds(2))) << Dump();
}

TEST_F(PluginModeTest, KubeletRefusalIsShownWithItsMessage) {
  ASSERT_TRUE(sim_.Start());
  sim_.RefuseRegistrations("the ResourceName \"nvidia.com/gpu\" is invalid");
  StartAgent({}, FixturePath("8-gpu-nvlink.yaml"), {}, /*start_sim=*/false);
  ASSERT_TRUE(agent_->WaitForStderr("kubelet refused registration")) << Dump();
  EXPECT_NE(agent_->Stderr().find("the ResourceName \\\"nvidia.com/gpu\\\" is invalid"),
            std::string::npos)
      << Dump();
  sim_.RefuseRegistrations("");
  ASSERT_TRUE(sim_.WaitForRegistrations(1)) << Dump();
}

TEST_F(PluginModeTest, NoNvmlWithFailOnInitErrorFalseDoesNotRegister) {
  StartAgent({"--fail-on-init-error=false"}, dir_.Write("f.yaml", "initError: 9\n"));
  ASSERT_TRUE(agent_->WaitForStderr("waiting without registering")) << Dump();
  EXPECT_EQ(sim_.registrations(), 0);
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Dump();
}

TEST_F(PluginModeTest, StaleSocketIsReplacedLiveOneRefused) {
  // A stale socket: bound, never listened on, left behind.
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = dir_.Join("nvidia-gpu.sock");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(fd);
  }
  StartAgent();
  ASSERT_TRUE(Registered()) << Dump();
  EXPECT_NE(agent_->Stderr().find("removed stale socket"), std::string::npos);
  // A second agent for the same socket must refuse, not steal it.
  RunResult second =
      RunAgent({"run", "--kubelet-socket", sim_.socket()}, FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  EXPECT_EQ(second.code, 1);
  EXPECT_NE(second.err.find("is served by another live process"), std::string::npos) << second.err;
  EXPECT_TRUE(agent_->Running());
}

TEST(PluginModeBadInputTest, SocketFolderMissing) {
  RunResult r = RunAgent({"run", "--kubelet-socket", "/nonexistent/dp/kubelet.sock"},
                         FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("socket folder \\\"/nonexistent/dp\\\" does not exist"), std::string::npos)
      << r.err;
}

TEST(PluginModeBadInputTest, SocketFolderNotWritable) {
  TempDir dir;
  std::vector<std::string> args = {"run", "--kubelet-socket", dir.Join("kubelet.sock")};
  if (::geteuid() == 0) {
    // Root writes anywhere: run the agent as nobody, for whom the folder
    // (owned by root, mode 0755) is read-only.
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    Subprocess p({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                  BinaryPath(), "run", "--kubelet-socket", dir.Join("kubelet.sock")},
                 FakeNvmlEnv(FixturePath("1-gpu.yaml")));
    EXPECT_EQ(p.Wait(), 1) << p.Stderr();
    EXPECT_NE(p.Stderr().find("is not writable by this process"), std::string::npos) << p.Stderr();
    return;
  }
  ::chmod(dir.path().c_str(), 0500);
  RunResult r = RunAgent(args, FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  ::chmod(dir.path().c_str(), 0700);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not writable"), std::string::npos) << r.err;
}

TEST(PluginModeBadInputTest, SocketPathTooLong) {
  TempDir dir;
  const std::string deep = dir.Join(std::string(100, 'd'));
  std::filesystem::create_directories(deep);
  RunResult r = RunAgent({"run", "--kubelet-socket", deep + "/kubelet.sock"},
                         FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unix sockets allow at most 107"), std::string::npos) << r.err;
}

constexpr const char* kMig1g = "nvidia.com/mig-1g.10gb";
constexpr const char* kMig2g = "nvidia.com/mig-2g.20gb";
// In the 2-gpu-mig fixture: GPU 0's instances 1 (2g.20gb), 2 and 3 (1g.10gb).
constexpr const char* kMigGi1 = "MIG-830ac273-9aa0-574f-9f5c-22f3462d8634";
constexpr const char* kMigGi2 = "MIG-88046736-7ede-57ab-bf0a-d906907fb941";
constexpr const char* kMigGi3 = "MIG-0262095c-56cd-5b2e-903c-5f38b7f3d9b2";

std::string HealthOf(const Devices& devices, const std::string& id) {
  for (const auto& d : devices) {
    if (d.id() == id) return d.health();
  }
  return "absent";
}

TEST_F(PluginModeTest, MixedMigServesEachProfileOnItsOwnSocket) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  dir_.Write("devroot/dev/nvidia0", "");
  dir_.Write("devroot/dev/nvidia1", "");
  dir_.Write("proc/driver/nvidia-caps/mig-minors",
             "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
             "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
             "gpu0/gi3/ci0/access 31\n");
  StartAgent({"--mig-strategy", "mixed", "--pass-device-specs", "--dev-root", dir_.Join("devroot"),
              "--proc-root", dir_.Join("proc")},
             FixturePath("2-gpu-mig.yaml"));
  ASSERT_TRUE(Registered(3)) << Dump();
  std::map<std::string, std::string> endpoint_of;
  for (const auto& r : sim_.registration_requests()) endpoint_of[r.resource_name()] = r.endpoint();
  EXPECT_EQ(endpoint_of, (std::map<std::string, std::string>{{kGpu, "nvidia-gpu.sock"},
                                                             {kMig1g, "nvidia-mig-1g.10gb.sock"},
                                                             {kMig2g, "nvidia-mig-2g.20gb.sock"}}));
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 1; }));
  EXPECT_EQ(sim_.Devices(kMig2g).at(0).id(), kMigGi1);

  // Allocate: the MIG UUID for the runtime, the parent's node and the two
  // capability nodes of that instance.
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(kMigGi2);
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kMig1g, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string root = dir_.Join("devroot");
  EXPECT_EQ(resp.container_responses(0).ShortDebugString(),
            StrCat(R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: ")", kMigGi2, R"(" } )",
                   R"(devices { container_path: "/dev/nvidia0" host_path: ")", root,
                   R"(/dev/nvidia0" permissions: "rw" } )",
                   R"(devices { container_path: "/dev/nvidia-caps/nvidia-cap21" host_path: ")",
                   root, R"(/dev/nvidia-caps/nvidia-cap21" permissions: "rw" } )",
                   R"(devices { container_path: "/dev/nvidia-caps/nvidia-cap22" host_path: ")",
                   root, R"(/dev/nvidia-caps/nvidia-cap22" permissions: "rw" })"));
  // A whole-GPU ID is unknown to a MIG resource.
  v1beta1::AllocateRequest wrong;
  wrong.add_container_requests()->add_devices_ids(FixtureUuids(FixturePath("2-gpu-mig.yaml"))[1]);
  EXPECT_EQ(sim_.Allocate(kMig1g, wrong, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // An XID NVML scopes to GPU instance 2 takes out that MIG device only.
  Nvml("xid 0 94 2 0");
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) {
    return HealthOf(d, kMigGi2) == "Unhealthy" && HealthOf(d, kMigGi3) == "Healthy";
  })) << Dump();
  EXPECT_EQ(HealthOf(sim_.Devices(kMig2g), kMigGi1), "Healthy");
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return CountHealthy(d) == 2; }))
      << Dump();
  // An XID on the whole GPU takes out every MIG device on it, and nothing else.
  Nvml("xid 0 79");
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return CountHealthy(d) == 0; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return CountHealthy(d) == 0; }));
  EXPECT_EQ(CountHealthy(sim_.Devices(kGpu)), 1);
}

// One container asking for two MIG profiles: the kubelet calls Allocate on
// each resource's plugin and merges the answers' annotations, the first of
// two equal keys winning. Each answer's CDI annotation key is its own, so
// the container gets both devices.
TEST_F(PluginModeTest, TwoResourcesInOneContainerKeepBothCdiAnnotations) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  // What the CDI spec the agent writes needs: driver files, nodes, MIG caps.
  ASSERT_TRUE(WriteFakeDriverRoot(dir_.Join("driver"), "550.54.15"));
  WriteFakeDevRoot(dir_.Join("devroot"), {0, 1}, {12, 13, 21, 22, 30, 31}, false);
  dir_.Write("proc/driver/nvidia-caps/mig-minors",
             "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\n"
             "gpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\ngpu0/gi3/ci0/access 31\n");
  StartAgent({"--mig-strategy", "mixed", "--device-list-strategy", "cdi-annotations,cdi-cri",
              "--cdi-spec-dir", dir_.Join("cdi"), "--nvidia-driver-root", dir_.Join("driver"),
              "--dev-root", dir_.Join("devroot"), "--proc-root", dir_.Join("proc")},
             FixturePath("2-gpu-mig.yaml"));
  ASSERT_TRUE(sim_.WaitForAllocatable(kMig1g, 2, std::chrono::seconds(10))) << Dump();
  ASSERT_TRUE(sim_.WaitForAllocatable(kMig2g, 1, std::chrono::seconds(10))) << Dump();
  std::vector<v1beta1::ContainerAllocateResponse> responses;
  for (const auto& [resource, id] : {std::pair{kMig1g, kMigGi2}, std::pair{kMig2g, kMigGi1}}) {
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::Status s = sim_.Allocate(resource, req, &resp);
    ASSERT_TRUE(s.ok()) << resource << ": " << s.error_message();
    responses.push_back(resp.container_responses(0));
  }
  // As the kubelet merges them: first key wins, CDI devices once each.
  const auto merged = KubeletSimulator::MergeForContainer(responses);
  EXPECT_TRUE(merged.conflicts.empty()) << merged.conflicts.front();
  std::set<std::string> names;
  for (const auto& [k, v] : merged.annotations) names.insert(v);
  const std::set<std::string> want = {StrCat("gpu-agent.github.io/gpu=", kMigGi2),
                                      StrCat("gpu-agent.github.io/gpu=", kMigGi1)};
  EXPECT_EQ(names, want);
  EXPECT_EQ(std::set<std::string>(merged.cdi_devices.begin(), merged.cdi_devices.end()), want);
  EXPECT_EQ(merged.cdi_devices.size(), 2u);
}

// A GPU NVML calls lost at discovery takes its MIG devices out; when it
// answers again they come back with it (their outage is the GPU's, kept as
// the health watcher reports and clears it).
// With XID health checks off, a GPU NVML calls lost at discovery is still
// out (the health watcher reports it even then: it is the one source).
TEST_F(PluginModeTest, GpuLostAtDiscoveryStaysOutWithHealthChecksOff) {
  std::string text = ReadFile(FixturePath("8-gpu-nvlink.yaml"));
  const size_t at = text.find("  - uuid: ");
  ASSERT_NE(at, std::string::npos);
  const size_t eol = text.find('\n', at);
  text.insert(eol + 1, "    fail:\n      nvmlDeviceGetMinorNumber: 15\n");
  StartAgent({}, dir_.Write("lost.yaml", text), {{"DP_DISABLE_HEALTHCHECKS", "all"}});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 8; })) << Dump();
  EXPECT_EQ(CountHealthy(sim_.Devices(kGpu)), 7) << Dump();
  // An XID elsewhere is not watched, and does not bring the lost GPU back.
  Nvml("xid 3 79");
  EXPECT_FALSE(sim_.WaitForDevices(
      kGpu, [](const Devices& d) { return CountHealthy(d) != 7; }, std::chrono::milliseconds(500)));
}

TEST_F(PluginModeTest, MigDevicesOfAGpuLostAtDiscoveryComeBackWithIt) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  std::string text = ReadFile(FixturePath("2-gpu-mig.yaml"));
  const std::string gpu0 = "  - uuid: GPU-ed474d47-acdb-5d33-bc5a-38d1d781b523\n";
  ASSERT_NE(text.find(gpu0), std::string::npos);
  // One discovery query answers GPU_IS_LOST (15); the GPU answers again by
  // the time the watcher probes it.
  text.replace(text.find(gpu0), gpu0.size(),
               gpu0 + "    fail:\n      nvmlDeviceGetMinorNumber: 15\n");
  StartAgent({"--mig-strategy", "mixed"}, dir_.Write("lost-mig.yaml", text));
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return CountHealthy(d) == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return CountHealthy(d) == 1; }))
      << Dump();
  // They did start out: the first update the kubelet saw had them all out.
  const auto updates = sim_.Updates(kMig1g);
  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(CountHealthy(updates.front().devices), 0);
}

// The 2-gpu-mig fixture with `extra` lines under GPU `gpu`'s uuid and
// `top` lines at the top.
std::string MigFixtureWith(const TempDir& dir, const std::string& name, int gpu,
                           const std::string& extra, const std::string& top = "") {
  std::string text = ReadFile(FixturePath("2-gpu-mig.yaml"));
  const std::string line =
      StrCat("  - uuid: ", FixtureUuids(FixturePath("2-gpu-mig.yaml"))[gpu], "\n");
  EXPECT_NE(text.find(line), std::string::npos);
  text.replace(text.find(line), line.size(), line + extra);
  return dir.Write(name, top + text);
}

// In a container without CAP_SYS_ADMIN NVML refuses the memory of a
// MIG-enabled GPU, which the profile names were once computed from; they
// come from the GPU's instance profiles instead, with NVML's own names or,
// from a driver without them (before R510), their memory sizes.
TEST_F(PluginModeTest, MigProfilesAreNamedInAnUnprivilegedContainer) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  StartAgent({"--mig-strategy", "mixed"},
             dir_.Write("unprivileged.yaml",
                        "privileged: false\n" + ReadFile(FixturePath("2-gpu-mig.yaml"))));
  ASSERT_TRUE(Registered(3)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  EXPECT_EQ(sim_.Devices(kMig2g).at(0).id(), kMigGi1);
  EXPECT_EQ(CountHealthy(sim_.Devices(kMig1g)), 2);
  EXPECT_NE(Dump().find("Insufficient Permissions"), std::string::npos) << Dump();
  EXPECT_EQ(Dump().find("has no profile name"), std::string::npos) << Dump();
}

TEST_F(PluginModeTest, MigProfilesAreNamedUnprivilegedOnADriverWithoutProfileNames) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  StartAgent({"--mig-strategy", "mixed"},
             MigFixtureWith(dir_, "old.yaml", 0,
                            "    fail:\n      nvmlDeviceGetGpuInstanceProfileInfoV: 13\n",
                            "privileged: false\n"));
  ASSERT_TRUE(Registered(3)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  EXPECT_EQ(sim_.Devices(kMig2g).at(0).id(), kMigGi1);
}

// A GPU whose MIG mode NVML cannot tell is not handed out whole under a MIG
// strategy: it may be in MIG mode, where a pod given it finds no CUDA
// device. The log names the GPU and NVML's error.
TEST_F(PluginModeTest, GpuWhoseMigModeIsUnknownIsNotAdvertisedWhole) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  StartAgent(
      {"--mig-strategy", "mixed"},
      MigFixtureWith(dir_, "unknown.yaml", 1, "    fail:\n      nvmlDeviceGetMigMode: 999\n"));
  const std::string gpu1 = FixtureUuids(FixturePath("2-gpu-mig.yaml"))[1];
  ASSERT_TRUE(agent_->WaitForStderr(StrCat("GPU 1 (", gpu1,
                                           ") is not advertised: its MIG mode is "
                                           "unknown (nvmlDeviceGetMigMode: Unknown Error (999))")))
      << Dump();
  ASSERT_TRUE(Registered(2)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  std::set<std::string> resources;
  for (const auto& r : sim_.registration_requests()) resources.insert(r.resource_name());
  EXPECT_EQ(resources, (std::set<std::string>{kMig1g, kMig2g}));
}

TEST_F(PluginModeTest, ShippedMigExampleConfigWithARealDriverTable) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  dir_.Write("proc/driver/nvidia-caps/mig-minors",
             ReadFile(SourceDir() + "/tests/fixtures/proc/mig-minors"));
  StartAgent({"--config", SourceDir() + "/config/mig-mixed.yaml", "--proc-root", dir_.Join("proc")},
             FixturePath("2-gpu-mig.yaml"));
  ASSERT_TRUE(Registered(3)) << Dump();
  // The two 1g.10gb devices shared two ways; the 2g.20gb and the whole GPU as they are.
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 4; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 1; }));
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(StrCat(kMigGi3, "::1"));
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kMig1g, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string text = resp.container_responses(0).ShortDebugString();
  // gpu0/gi3/access and gpu0/gi3/ci0/access in the H100 driver's table.
  EXPECT_NE(text.find("/dev/nvidia-caps/nvidia-cap30"), std::string::npos) << text;
  EXPECT_NE(text.find("/dev/nvidia-caps/nvidia-cap31"), std::string::npos) << text;
  EXPECT_NE(text.find(StrCat(R"(value: ")", kMigGi3, R"(")")), std::string::npos) << text;
}

TEST_F(PluginModeTest, SingleMigStrategyOnMixedGpusIsAClearError) {
  RunResult r = RunAgent({"run", "--mig-strategy", "single", "--kubelet-socket", sim_.socket()},
                         FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("flags.migStrategy single needs every GPU in MIG mode, but GPU(s) 1 are "
                       "not"),
            std::string::npos)
      << r.err;
}

TEST_F(PluginModeTest, MissingMigMinorsWithDeviceSpecsIsAClearError) {
  RunResult r = RunAgent({"run", "--mig-strategy", "mixed", "--pass-device-specs", "--proc-root",
                          dir_.Join("proc"), "--kubelet-socket", sim_.socket()},
                         FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(
      r.err.find(dir_.Join("proc/driver/nvidia-caps/mig-minors") + ": cannot read it (missing)"),
      std::string::npos)
      << r.err;
}

TEST_F(PluginModeTest, SelectedGpusOnlyAndPackedReplicas) {
  const std::string config = dir_.Write("sel.yaml", R"(version: v1
devices:
  exclude: ["index:0", "index:7"]
sharing:
  timeSlicing:
    allocationPolicy: packed
    resources:
    - name: nvidia.com/gpu
      replicas: 4
)");
  StartAgent({"--config", config});
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 24; })) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  for (const auto& d : sim_.Devices(kGpu)) {
    EXPECT_NE(d.id().rfind(uuids[0], 0), 0u) << d.id();
    EXPECT_NE(d.id().rfind(uuids[7], 0), 0u) << d.id();
  }
  // Packed: three replicas come from one GPU, not three.
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& d : sim_.Devices(kGpu)) c->add_available_deviceids(d.id());
  c->set_allocation_size(3);
  v1beta1::PreferredAllocationResponse resp;
  ASSERT_TRUE(sim_.GetPreferredAllocation(kGpu, req, &resp).ok());
  std::set<std::string> gpus;
  for (const auto& id : resp.container_responses(0).deviceids())
    gpus.insert(id.substr(0, id.find("::")));
  EXPECT_EQ(gpus.size(), 1u);
}

std::string Tail(const std::string& s, size_t n = 6000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// What kubelets 1.25 to 1.34 do (see kubelet_simulator.h) and the old
// registration did not survive: when any stream of a resource ends, the
// kubelet drops the CURRENT client, so a registration that overtakes the end
// of the previous generation's stream is dropped at once, and the resource
// stays at 0 until the plugin registers again. A seeded random mix of
// SIGHUP reloads (alternating configs), kubelet restarts and streams the
// kubelet drops; after each, the kubelet's allocatable must be the fixture's
// within 2 s.
TEST_F(PluginModeTest, ReloadsRestartsAndDroppedStreamsAlwaysEndRegistered) {
  if (sim_.profile() != KubeletSimulator::Profile::k1_25) {
    GTEST_SKIP() << "the race is a kubelet 1.25+ one";
  }
  uint32_t seed = 20261123;
  if (const char* v = std::getenv("RACE_SEED")) seed = static_cast<uint32_t>(std::stoul(v));
  std::printf("seed %u (RACE_SEED=%u repeats this run)\n", seed, seed);
  const std::string a = "version: v1\n";
  const std::string b = R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
)";
  const std::string config = dir_.Write("c.yaml", a);
  // A shorter grace than the default 1 s keeps the 200 steps quick.
  StartAgent({"--config", config, "--stream-grace-period", "300ms"});
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
  std::mt19937 rng(seed);
  bool on_b = false;
  int counts[3] = {0, 0, 0};
  for (int step = 0; step < 200; ++step) {
    const int action = static_cast<int>(rng() % 3);
    const char* names[] = {"SIGHUP", "kubelet restart", "stream dropped by the kubelet"};
    ++counts[action];
    const int before = sim_.registrations();
    switch (action) {
      case 0:
        on_b = !on_b;
        dir_.Write("c.yaml", on_b ? b : a);
        agent_->Signal(SIGHUP);
        break;
      case 1:
        ASSERT_TRUE(sim_.Restart());
        break;
      default:
        sim_.DisconnectCurrent(kGpu);
        break;
    }
    const int want = on_b ? 16 : 8;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    auto left = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
    };
    // Registered again, every older stream's end seen by the kubelet (its
    // late end is what drops the new client), and then the value right:
    // nothing can take it away after that but the next step.
    const bool registered = sim_.WaitForRegistrations(before + 1, std::chrono::seconds(2));
    const bool settled = registered && sim_.WaitForOldClientsDone(left());
    const bool allocatable = settled && sim_.WaitForAllocatable(kGpu, want, left());
    ASSERT_TRUE(allocatable) << "seed " << seed << ", step " << step << " (" << names[action]
                             << "): "
                             << (!registered ? "not registered again"
                                 : !settled  ? "an older stream still open"
                                             : "registered")
                             << ", allocatable " << sim_.Allocatable(kGpu) << ", want " << want
                             << "\n"
                             << Tail(Dump());
  }
  EXPECT_EQ(sim_.max_concurrent_registrations(), 1) << "two Register calls in flight at once";
  std::printf("steps: %d SIGHUP, %d kubelet restarts, %d dropped streams; %d registrations\n",
              counts[0], counts[1], counts[2], sim_.registrations());
}

// After a kubelet restart pods are admitted again: refused while the
// resource is not registered, or the device a container had is unhealthy.
TEST_F(PluginModeTest, AdmissionAfterAKubeletRestart) {
  StartAgent();
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
  const auto uuids = FixtureUuids(FixturePath("8-gpu-nvlink.yaml"));
  EXPECT_EQ(sim_.Admit(kGpu, {uuids[3]}), "");
  sim_.Stop();
  EXPECT_NE(sim_.Admit(kGpu, {uuids[3]}).find("can't allocate unregistered device"),
            std::string::npos);
  ASSERT_TRUE(sim_.Restart());
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << Dump();
  EXPECT_EQ(sim_.Admit(kGpu, {uuids[3]}), "");
  Nvml("xid 3 79");
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 7, std::chrono::seconds(10))) << Dump();
  EXPECT_NE(sim_.Admit(kGpu, {uuids[3]}).find("no longer healthy"), std::string::npos);
  EXPECT_EQ(sim_.Admit(kGpu, {uuids[4]}), "");
}

}  // namespace
}  // namespace gpu_agent::testing
