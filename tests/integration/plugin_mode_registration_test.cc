// Plugin mode, registering and serving: the plugin socket and its
// registration with the kubelet, kubelet restarts and refusals, bad socket
// paths, and what reaches the socket that is not a device-plugin call.
// The fixture: plugin_mode_fixture.h.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/strings.h"
#include "deviceplugin/kubelet_client.h"
#include "integration/plugin_mode_fixture.h"

namespace gpu_agent::testing {
namespace {

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
  // The socket is the agent's alone (the kubelet, root, is its only peer).
  struct stat st;
  ASSERT_EQ(::stat(dir_.Join("nvidia-gpu.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
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
  // Waiting is sleeping: every thread of the agent blocked, seen so in 50
  // looks in a row (a retry now and then may wake one). A spinning loop
  // is running whenever it is looked at, and burns ~100 ticks a second.
  int asleep = 0;
  ASSERT_TRUE(WaitFor([&] {
    asleep = AllThreadsAsleep(agent_->pid()) ? asleep + 1 : 0;
    return asleep >= 50;
  })) << Dump();
  EXPECT_LT(CpuTicks(agent_->pid()) - ticks, 10);
  // The kubelet arrives: inotify sees kubelet.sock, registration follows.
  ASSERT_TRUE(sim_.Start());
  ASSERT_TRUE(sim_.WaitForRegistrations(1, std::chrono::seconds(2))) << Dump();
}

// The main thread waits on signals and drives the supervisor in one poll;
// Register, which a kubelet may hold for its whole timeout, runs on a thread
// of its own for as long as the call lasts. So a reload and a stop are
// served at once while the kubelet holds the call.
TEST_F(PluginModeTest, SignalsAreServedWhileTheKubeletHoldsRegister) {
  ASSERT_TRUE(sim_.Start());
  sim_.HoldRegistrations(true);
  StartAgent({}, FixturePath("8-gpu-nvlink.yaml"), {}, /*start_sim=*/false);
  ASSERT_TRUE(WaitFor([&] { return sim_.held_registrations() == 1; })) << Dump();
  std::vector<std::string> names = ThreadNames(agent_->pid());
  EXPECT_EQ(std::count(names.begin(), names.end(), "supervisor"), 0) << StrJoin(names, " ");
  EXPECT_EQ(std::count(names.begin(), names.end(), "register"), 1) << StrJoin(names, " ");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(agent_->WaitForStderr("reload done")) << Dump();
  EXPECT_EQ(sim_.registrations(), 0);
  const auto started = std::chrono::steady_clock::now();
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(), 0) << Dump();
  // Well under the 30 s the kubelet may hold Register.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

// Once registered, no thread of the agent's is left for registering.
TEST_F(PluginModeTest, NoRegisterOrSupervisorThreadOnceRegistered) {
  StartAgent();
  ASSERT_TRUE(Registered()) << Dump();
  ASSERT_TRUE(WaitFor([&] {
    const std::vector<std::string> names = ThreadNames(agent_->pid());
    return std::count(names.begin(), names.end(), "register") == 0;
  })) << StrJoin(ThreadNames(agent_->pid()), " ");
  const std::vector<std::string> names = ThreadNames(agent_->pid());
  EXPECT_EQ(std::count(names.begin(), names.end(), "supervisor"), 0) << StrJoin(names, " ");
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
  EXPECT_NE(r.err.find("gRPC serves a unix socket of at most 105"), std::string::npos) << r.err;
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
