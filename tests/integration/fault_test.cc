// Fault injection at edges the mode tests leave: the agent killed with
// SIGKILL at chosen points (mid-registration, mid-reload, mid-PATCH) and
// started again, and a client holding a thousand idle ListAndWatch streams.
// Kill points are events the test waits for, not timers.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "deviceplugin/api.grpc.pb.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kGpu = "nvidia.com/gpu";

class PluginKillTest : public ::testing::Test {
 protected:
  PluginKillTest() : sim_(dir_.path(), KubeletSimulator::Profile::k1_25) {}
  void SetUp() override {
    ASSERT_TRUE(WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir_.Join("sys")));
    ASSERT_TRUE(sim_.Start());
    dir_.Write("c.yaml", "version: v1\n");
  }
  std::unique_ptr<Subprocess> StartAgent() {
    auto env = FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml"));
    env["FAKE_NVML_CONTROL"] = dir_.Join("nvml.ctl");
    return std::make_unique<Subprocess>(
        std::vector<std::string>{BinaryPath(), "run", "--config", dir_.Join("c.yaml"),
                                 "--kubelet-socket", sim_.socket(), "--sysfs-root",
                                 dir_.Join("sys")},
        env);
  }
  // A fresh agent after a killed one: the killed one's socket file is still
  // there (nothing removed it), and must not stop the new one. Killed
  // mid-reload, the agent may have been between removing its socket and
  // serving the next (a re-serve): then there is none to leave behind.
  void ComesBack(const char* where, bool socket_left = true) {
    struct stat st;
    if (socket_left) {
      EXPECT_EQ(::stat(dir_.Join("nvidia-gpu.sock").c_str(), &st), 0)
          << where << ": the killed agent's socket should be left behind";
    }
    const int before = sim_.registrations();
    auto agent = StartAgent();
    ASSERT_TRUE(sim_.WaitForRegistrations(before + 1)) << where << "\n" << agent->Stderr();
    ASSERT_TRUE(sim_.WaitForOldClientsDone(std::chrono::seconds(10)));
    ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10)))
        << where << ": allocatable " << sim_.Allocatable(kGpu) << "\n"
        << agent->Stderr();
    agent_ = std::move(agent);
  }
  static void Kill(Subprocess& a) {
    a.Signal(SIGKILL);
    EXPECT_EQ(a.Wait(), 128 + SIGKILL);
  }

  TempDir dir_;
  KubeletSimulator sim_;
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(PluginKillTest, KilledMidRegistrationMidReloadOrServingComesBackRegistered) {
  // Mid-registration: the kubelet holds the Register call.
  sim_.HoldRegistrations(true);
  {
    auto a = StartAgent();
    ASSERT_TRUE(WaitFor([&] { return sim_.held_registrations() == 1; })) << a->Stderr();
    Kill(*a);
  }
  sim_.HoldRegistrations(false);
  ComesBack("killed mid-registration");
  // Mid-reload: killed as soon as it starts re-reading.
  dir_.Write("c.yaml", "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: index\n");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(agent_->WaitForStderr("SIGHUP: reloading")) << agent_->Stderr();
  Kill(*agent_);
  ComesBack("killed mid-reload", /*socket_left=*/false);
  // Serving, with the kubelet's stream open.
  Kill(*agent_);
  ComesBack("killed while serving");
}

TEST(StaticKillTest, KilledMidPatchLeavesOnlyAValueItWouldSetAndTheNextOneConverges) {
  TempDir dir;
  ApiServerStub api;
  api.AddNode("gpu-node-1");
  auto start = [&] {
    auto env = FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml"));
    env["FAKE_NVML_CONTROL"] = dir.Join("nvml.ctl");
    return std::make_unique<Subprocess>(
        // The capacity PATCH alone: the GpuHealthy condition's own PATCH,
        // held beside it and applied first, would move the Node's version
        // past the capacity PATCH's test (a live agent reads and retries).
        std::vector<std::string>{BinaryPath(), "run", "--mode", "static", "--node-name",
                                 "gpu-node-1", "--proxy=" + api.url(), "--health-node-events",
                                 "off"},
        env);
  };
  auto capacity_is = [&](const std::string& v) {
    return WaitFor([&] { return api.Capacity("gpu-node-1", kGpu) == v; });
  };
  auto a = start();
  ASSERT_TRUE(capacity_is("8")) << a->Stderr();
  // A GPU falls off the bus; the PATCH that says so is held by the server,
  // and the agent is killed while it waits for the answer.
  api.HangPatches(true);
  ASSERT_TRUE(WriteFifo(dir.Join("nvml.ctl"), "xid 2 79"));
  ASSERT_TRUE(WaitFor([&] { return api.held_patches() == 1; })) << a->Stderr();
  a->Signal(SIGKILL);
  EXPECT_EQ(a->Wait(), 128 + SIGKILL);
  EXPECT_EQ(api.Capacity("gpu-node-1", kGpu), "8");
  // The server applies what it received: the value the agent meant, 7.
  api.HangPatches(false);
  ASSERT_TRUE(capacity_is("7"));
  // A new agent (its NVML sees all 8 GPUs) sets what it sees.
  auto b = start();
  ASSERT_TRUE(capacity_is("8")) << b->Stderr();
  EXPECT_EQ(api.Allocatable("gpu-node-1", kGpu), "8");
}

// A client (a buggy kubelet, or anyone who can reach the socket) holding a
// thousand idle ListAndWatch streams: each gets the list and every change,
// Allocate still answers, and when they go the agent returns to its size.
TEST_F(PluginKillTest, AThousandIdleStreamsGetEveryChangeAndLeaveNothingBehind) {
  agent_ = StartAgent();
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << agent_->Stderr();
  const int threads_before = CountThreads(agent_->pid());
  const int fds_before = CountOpenFds(agent_->pid());
  constexpr int kChannels = 10, kPerChannel = 100;
  struct Stream {
    grpc::ClientContext ctx;
    v1beta1::ListAndWatchResponse msg;
    std::unique_ptr<grpc::ClientAsyncReader<v1beta1::ListAndWatchResponse>> reader;
    int lists = 0;
    int healthy = -1;  // in the latest list
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<v1beta1::DevicePlugin::Stub>> stubs;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int c = 0; c < kChannels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    stubs.push_back(v1beta1::DevicePlugin::NewStub(grpc::CreateCustomChannel(
        "unix://" + dir_.Join("nvidia-gpu.sock"), grpc::InsecureChannelCredentials(), args)));
    for (int i = 0; i < kPerChannel; ++i) {
      auto st = std::make_unique<Stream>();
      st->reader = stubs.back()->AsyncListAndWatch(&st->ctx, v1beta1::Empty(), &cq, st.get());
      streams.push_back(std::move(st));
    }
  }
  // Tags: the Stream for "started", the Stream with the low bit set for
  // "a list was read". Each stream always has one read waiting.
  auto read = [](Stream* st) {
    st->reader->Read(&st->msg, reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(st) | 1));
  };
  auto all_have = [&](int healthy) {
    for (const auto& st : streams) {
      if (st->healthy != healthy) return false;
    }
    return true;
  };
  // Handles events until every stream's latest list has `healthy` devices.
  auto pump_until = [&](int healthy) {
    while (!all_have(healthy)) {
      void* tag;
      bool ok;
      const auto r =
          cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(20));
      if (r != grpc::CompletionQueue::GOT_EVENT || !ok) return false;
      const auto raw = reinterpret_cast<uintptr_t>(tag);
      Stream* st = reinterpret_cast<Stream*>(raw & ~uintptr_t{1});
      if (raw & 1) {
        ++st->lists;
        st->healthy = 0;
        for (const auto& d : st->msg.devices()) st->healthy += d.health() == "Healthy";
      }
      read(st);
    }
    return true;
  };
  ASSERT_TRUE(pump_until(8)) << agent_->Stderr();
  // A GPU goes: every stream hears it, the kubelet too.
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 3 79"));
  ASSERT_TRUE(pump_until(7)) << agent_->Stderr();
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 7, std::chrono::seconds(10)));
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(sim_.Devices(kGpu).at(0).id());
  v1beta1::AllocateResponse resp;
  EXPECT_TRUE(sim_.Allocate(kGpu, req, &resp).ok());
  // They go; the agent's threads and fds come back to about where they were.
  for (auto& s : streams) s->ctx.TryCancel();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  streams.clear();
  stubs.clear();
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds(agent_->pid()) <= fds_before + 2; }))
      << "fds " << fds_before << " -> " << CountOpenFds(agent_->pid());
  EXPECT_TRUE(WaitFor([&] { return CountThreads(agent_->pid()) <= threads_before + 4; }))
      << "threads " << threads_before << " -> " << CountThreads(agent_->pid());
  EXPECT_TRUE(agent_->Running());
  EXPECT_EQ(sim_.Allocatable(kGpu), 7);
}

// The metrics port flooded with idle connections (say a misbehaving client
// in the pod network): the device plugin keeps serving, the agent keeps
// running, and once the connections go the endpoint answers again.
TEST_F(PluginKillTest, MetricsPortFloodedWithIdleConnectionsDoesNotStopThePlugin) {
  auto env = FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml"));
  env["FAKE_NVML_CONTROL"] = dir_.Join("nvml.ctl");
  agent_ = std::make_unique<Subprocess>(
      std::vector<std::string>{BinaryPath(), "run", "--kubelet-socket", sim_.socket(),
                               "--sysfs-root", dir_.Join("sys"), "--metrics-address",
                               "127.0.0.1:0"},
      env);
  ASSERT_TRUE(agent_->WaitForStderr("metrics endpoint listening")) << agent_->Stderr();
  const std::string err = agent_->Stderr();
  const std::string key = "address=127.0.0.1:";
  const int port = std::stoi(err.substr(err.find(key) + key.size()));
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(10))) << agent_->Stderr();
  const int fds_before = CountOpenFds(agent_->pid());
  // 500 connections that never send a byte.
  std::vector<int> conns;
  for (int i = 0; i < 500; ++i) {
    // Non-blocking: the handshakes complete while the server accepts.
    const int fd = ConnectLoopback(port, /*nonblocking=*/true);
    ASSERT_GE(fd, 0) << i << ": " << std::strerror(errno);
    conns.push_back(fd);
  }
  // The plugin side does not share the metrics server's threads.
  for (int i = 0; i < 20; ++i) {
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(sim_.Devices(kGpu).at(i % 8).id());
    v1beta1::AllocateResponse resp;
    ASSERT_TRUE(sim_.Allocate(kGpu, req, &resp).ok()) << i;
  }
  ASSERT_TRUE(WriteFifo(dir_.Join("nvml.ctl"), "xid 3 79"));
  EXPECT_TRUE(sim_.WaitForAllocatable(kGpu, 7, std::chrono::seconds(10)));
  EXPECT_TRUE(agent_->Running());
  {
    // What a liveness probe (10 s timeout, as the manifests set) gets
    // during the flood: an answer (at the cap of 128 connections each new
    // one evicts the one idle longest; it used to be none within 10 s).
    httplib::Client during("127.0.0.1", port);
    during.set_connection_timeout(10, 0);
    during.set_read_timeout(10, 0);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = during.Get("/healthz");
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("during 500 idle connections: /healthz %s after %.1f s\n",
                r ? std::to_string(r->status).c_str() : "no answer", took);
    ASSERT_TRUE(r) << "no answer within the liveness probe's 10 s";
    EXPECT_EQ(r->status, 200);
  }
  for (int fd : conns) ::close(fd);
  // Gone: the endpoint answers again, and the agent holds no more fds than
  // before.
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor(
      [&] {
        auto r = http.Get("/healthz");
        return r && r->status == 200;
      },
      std::chrono::seconds(60)));
  std::printf("after 500 idle connections: /healthz answered again %.1f s after they closed\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds(agent_->pid()) <= fds_before + 2; }))
      << "fds " << fds_before << " -> " << CountOpenFds(agent_->pid());
}
}  // namespace
}  // namespace gpu_agent::testing
