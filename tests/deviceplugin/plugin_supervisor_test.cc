// PluginSupervisor in process, against the kubelet simulator on real unix
// sockets: a stream the kubelet drops, lost inotify events, the liveness
// bound, a Register call the kubelet holds while the agent stops, and the
// supervisor driven by its owner's poll instead of a thread of its own.
#include "deviceplugin/plugin_supervisor.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "kubelet_simulator.h"
#include "support/test_support.h"

namespace gpu_agent::deviceplugin {
namespace {

using gpu_agent::testing::KubeletSimulator;
using gpu_agent::testing::TempDir;
using gpu_agent::testing::ThreadNames;
using gpu_agent::testing::WaitFor;
using Profile = KubeletSimulator::Profile;

constexpr const char* kGpu = "nvidia.com/gpu";

// A new socket file at the same path: the file system may give it the old
// inode number, never also the old change time.
std::pair<ino_t, int64_t> FileId(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_ino, int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec};
}

std::vector<ResourceRuntime> TwoGpus() {
  ResourceSpec spec;
  spec.resource_name = kGpu;
  spec.endpoint = "gpu.sock";
  for (int g = 0; g < 2; ++g) {
    PluginDevice d;
    d.id = d.gpu_id = d.key.uuid = "GPU-" + std::to_string(g);
    d.physical = g;
    spec.devices.push_back(d);
  }
  spec.link_score = {{0, 0}, {0, 0}};
  return {{std::make_shared<DevicePublisher>(spec),
           std::make_shared<const Allocator>(AllocateOptions{})}};
}

class SupervisorTest : public ::testing::TestWithParam<Profile> {
 protected:
  SupervisorTest() : sim_(dir_.path(), GetParam()) {}

  void Start(SupervisorOptions o = {}) {
    o.kubelet_socket = sim_.socket();
    auto sup = PluginSupervisor::Start(o, TwoGpus());
    ASSERT_TRUE(sup.ok()) << sup.status();
    sup_ = *std::move(sup);
  }
  ResourceStatus Status() { return sup_->Status().at(0); }

  TempDir dir_;
  KubeletSimulator sim_;
  std::unique_ptr<PluginSupervisor> sup_;
};

TEST_P(SupervisorTest, AStreamTheKubeletDroppedIsRegisteredAgainOnAFreshSocket) {
  ASSERT_TRUE(sim_.Start());
  SupervisorOptions o;
  o.stream_grace = std::chrono::milliseconds(200);
  Start(o);
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  const auto before = FileId(dir_.Join("gpu.sock"));
  sim_.DisconnectCurrent(kGpu);
  EXPECT_EQ(sim_.Allocatable(kGpu), 0);
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  EXPECT_EQ(sim_.registrations(), 2);
  EXPECT_NE(FileId(dir_.Join("gpu.sock")), before);
  EXPECT_TRUE(WaitFor([&] { return Status().stream_heals == 1 && Status().open_streams == 1; }));
  EXPECT_EQ(sim_.max_concurrent_registrations(), 1);
}

// Status() (every scrape and probe) while streams end: the stream
// observer takes the supervisor's lock, Status() asks the services; taken
// in opposite orders they used to deadlock within a few drops.
TEST_P(SupervisorTest, StatusWhileStreamsEndDoesNotDeadlock) {
  ASSERT_TRUE(sim_.Start());
  SupervisorOptions o;
  o.stream_grace = std::chrono::milliseconds(100);
  Start(o);
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    while (!stop) {
      (void)sup_->Status();
      ++reads;
    }
  });
  for (int i = 0; i < 20; ++i) {
    const int before = sim_.registrations();
    sim_.DisconnectCurrent(kGpu);
    ASSERT_TRUE(sim_.WaitForRegistrations(before + 1, std::chrono::seconds(10)))
        << "drop " << i << ": no registration again (a deadlock stops the control thread)";
    ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10))) << "drop " << i;
  }
  stop = true;
  reader.join();
  EXPECT_GT(reads.load(), 0u);
}

TEST_P(SupervisorTest, LostFolderEventsReRegisterOnlyWhatChanged) {
  ASSERT_TRUE(sim_.Start());
  SupervisorOptions o;
  o.watch_folder = false;  // this test is the only one to look
  Start(o);
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  // The kubelet may open the stream before Register answers.
  ASSERT_TRUE(WaitFor([&] { return Status().registrations == 1; }));
  // Nothing changed: nothing to do (an overflow used to count as a restart).
  sup_->CheckSockets();
  EXPECT_EQ(sim_.registrations(), 1);
  EXPECT_EQ(Status().registrations, 1u);
  // The kubelet restarted unseen: a new kubelet.sock, our socket gone.
  ASSERT_TRUE(sim_.Restart());
  sup_->CheckSockets();
  ASSERT_TRUE(sim_.WaitForRegistrations(2));
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  EXPECT_EQ(sup_->kubelet_restarts(), 1u);
  // Only our socket removed, unseen: served again and registered.
  const auto before = FileId(dir_.Join("gpu.sock"));
  ASSERT_EQ(::unlink(dir_.Join("gpu.sock").c_str()), 0);
  sup_->CheckSockets();
  ASSERT_TRUE(sim_.WaitForRegistrations(3));
  EXPECT_NE(FileId(dir_.Join("gpu.sock")), before);
  EXPECT_EQ(sup_->kubelet_restarts(), 1u);
}

TEST_P(SupervisorTest, LivenessFailsWhenNoStreamAndNoRegistrationForTooLong) {
  ASSERT_TRUE(sim_.Start());
  SupervisorOptions o;
  o.stream_grace = std::chrono::milliseconds(100);
  o.stream_lost_limit = std::chrono::milliseconds(500);
  Start(o);
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  std::string why;
  EXPECT_TRUE(sup_->Alive(std::chrono::seconds(1), &why)) << why;
  sim_.Stop();  // the kubelet is gone, and its socket with it
  ASSERT_TRUE(WaitFor([&] { return !sup_->Alive(std::chrono::seconds(1), &why); }));
  EXPECT_NE(why.find("nvidia.com/gpu has had no ListAndWatch stream and no registration"),
            std::string::npos)
      << why;
  ASSERT_TRUE(sim_.Start());
  ASSERT_TRUE(sim_.WaitForAllocatable(kGpu, 2, std::chrono::seconds(10)));
  EXPECT_TRUE(WaitFor([&] { return sup_->Alive(std::chrono::seconds(1), &why); })) << why;
}

TEST_P(SupervisorTest, StopEndsARegisterTheKubeletHolds) {
  ASSERT_TRUE(sim_.Start());
  sim_.HoldRegistrations(true);
  Start();  // Register waits up to 30 s
  ASSERT_TRUE(WaitFor([&] { return sim_.held_registrations() == 1; }));
  const auto started = std::chrono::steady_clock::now();
  sup_->Stop();
  // Well under the 30 s the call may take.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_TRUE(WaitFor([&] { return sim_.held_registrations() == 0; }));
}

int Count(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<int>(std::count(names.begin(), names.end(), name));
}

// Drives `sup` as run's main thread does (poll its descriptors until it is
// due, then Turn) until `done` holds or 10 s pass.
bool DriveUntil(PluginSupervisor& sup, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    // Capped so `done`, which the simulator's threads change, is looked at.
    const auto due = std::min({sup.Turn(), deadline, now + std::chrono::milliseconds(50)});
    std::vector<pollfd> fds;
    for (int fd : sup.Descriptors()) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), PollTimeoutMs(due));
  }
  return true;
}

TEST_P(SupervisorTest, DrivenByItsOwnerItRegistersHealsAndReloadsWithoutAThread) {
  ASSERT_TRUE(sim_.Start());
  SupervisorOptions o;
  o.own_thread = false;
  o.stream_grace = std::chrono::milliseconds(200);
  Start(o);
  PluginSupervisor& sup = *sup_;
  ASSERT_TRUE(DriveUntil(sup, [&] { return sim_.Allocatable(kGpu) == 2; }));
  EXPECT_EQ(Count(ThreadNames(::getpid()), "supervisor"), 0);
  // The Register thread ends with its call.
  ASSERT_TRUE(DriveUntil(sup, [&] { return Status().registered; }));
  EXPECT_EQ(Count(ThreadNames(::getpid()), "register"), 0);
  // A kubelet restart, seen through the folder's inotify descriptor.
  ASSERT_TRUE(sim_.Restart());
  ASSERT_TRUE(DriveUntil(sup, [&] { return sim_.registrations() == 2; }));
  ASSERT_TRUE(DriveUntil(sup, [&] { return sim_.Allocatable(kGpu) == 2; }));
  EXPECT_EQ(sup.kubelet_restarts(), 1u);
  // A dropped stream, seen through a posted event and the grace timer.
  sim_.DisconnectCurrent(kGpu);
  ASSERT_TRUE(DriveUntil(sup, [&] { return sim_.registrations() == 3; }));
  ASSERT_TRUE(DriveUntil(sup, [&] { return sim_.Allocatable(kGpu) == 2; }));
  // A reload runs on the driving thread, inline.
  ASSERT_TRUE(sup.Reload(TwoGpus()).ok());
  ASSERT_TRUE(DriveUntil(sup, [&] { return sim_.registrations() == 4; }));
  ASSERT_TRUE(DriveUntil(sup, [&] { return sim_.Allocatable(kGpu) == 2; }));
  EXPECT_EQ(sim_.max_concurrent_registrations(), 1);
}

TEST_P(SupervisorTest, DrivenItsTurnNeverWaitsOnARegisterTheKubeletHolds) {
  ASSERT_TRUE(sim_.Start());
  sim_.HoldRegistrations(true);
  SupervisorOptions o;
  o.own_thread = false;
  Start(o);  // Register waits up to 30 s, on its own thread
  ASSERT_TRUE(DriveUntil(*sup_, [&] { return sim_.held_registrations() == 1; }));
  EXPECT_EQ(Count(ThreadNames(::getpid()), "register"), 1);
  // Turn returns while the kubelet still holds the call: a signal or a
  // reload on the driving thread is never stuck behind it.
  sup_->Turn();
  EXPECT_EQ(sim_.held_registrations(), 1);
  EXPECT_FALSE(Status().registered);
  const auto started = std::chrono::steady_clock::now();
  sup_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_TRUE(WaitFor([&] { return sim_.held_registrations() == 0; }));
  EXPECT_EQ(Count(ThreadNames(::getpid()), "register"), 0);
}

// A reload while the kubelet holds Register: the call for the replaced
// socket is cancelled, not waited out, and the new one goes out after the
// settle time.
TEST_P(SupervisorTest, DrivenAReloadCancelsARegisterTheKubeletHolds) {
  ASSERT_TRUE(sim_.Start());
  sim_.HoldRegistrations(true);
  SupervisorOptions o;
  o.own_thread = false;
  Start(o);
  ASSERT_TRUE(DriveUntil(*sup_, [&] { return sim_.held_registrations() == 1; }));
  ASSERT_TRUE(sup_->Reload(TwoGpus()).ok());
  // One Register at a time: the second arrives only once the first ended,
  // well inside the 30 s the kubelet may hold it.
  ASSERT_TRUE(DriveUntil(
      *sup_, [&] { return sim_.register_calls() == 2 && sim_.held_registrations() == 1; }));
  sim_.HoldRegistrations(false);
  ASSERT_TRUE(DriveUntil(*sup_, [&] { return Status().registered; }));
  EXPECT_EQ(sim_.registrations(), 1);  // the cancelled one never reached the kubelet's checks
  EXPECT_EQ(sim_.max_concurrent_registrations(), 1);
}

INSTANTIATE_TEST_SUITE_P(Kubelet, SupervisorTest, ::testing::Values(Profile::k1_25, Profile::k1_20),
                         [](const ::testing::TestParamInfo<Profile>& p) {
                           return p.param == Profile::k1_25 ? "v1_25" : "v1_20";
                         });

}  // namespace
}  // namespace gpu_agent::deviceplugin
