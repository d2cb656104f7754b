// The health watcher in-process, on the NVML stand-in, driven through its
// control FIFO.
#include "health/health_watcher.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <filesystem>
#include <mutex>

#include "health/stand_in_nvml.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"
#include "support/fake_clock.h"
#include "support/test_support.h"

namespace gpu_agent::health {
namespace {

using gpu_agent::testing::FakeNvmlDir;
using gpu_agent::testing::FixturePath;
using gpu_agent::testing::TempDir;
using gpu_agent::testing::WaitFor;
using gpu_agent::testing::WriteFifo;
using nvml::NvmlLibrary;
using nvml::OpenStandInNvml;
using nvml::StandInNvml;

class HealthWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StandInNvml nvml;
    OpenStandInNvml(dir_, "8-gpu-pcie.yaml", &nvml);
    lib_ = nvml.lib;
    uuids_ = nvml.uuids;
    ctl_ = nvml.ctl;
  }

  // Each case ends with its watcher's thread joined, and so with NVML let
  // go; the next case's init names its own copy of the fixture, which the
  // stand-in reads afresh (stand_in_nvml.h).
  void TearDown() override {
    watcher_.reset();
    EXPECT_EQ(HealthWatcher::JoinStopped(std::chrono::seconds(10)), 0);
  }

  void StartWatcher(HealthPolicy policy, std::set<std::string> bad = {},
                    const Clock* clock = Clock::Real()) {
    policy.wait_timeout = std::chrono::milliseconds(200);
    watcher_ = HealthWatcher::Start(
        lib_, uuids_, std::move(bad), policy,
        [this](const HealthChange& c) {
          std::lock_guard<std::mutex> lock(mu_);
          changes_.push_back(c);
        },
        {}, clock);
  }

  std::vector<HealthChange> Changes() {
    std::lock_guard<std::mutex> lock(mu_);
    return changes_;
  }

  void Send(const std::string& line) { ASSERT_TRUE(WriteFifo(ctl_, line)) << line; }

  TempDir dir_;
  std::string ctl_;
  std::shared_ptr<const NvmlLibrary> lib_;
  std::vector<std::string> uuids_;
  std::mutex mu_;
  std::vector<HealthChange> changes_;
  gpu_agent::testing::FakeClock fake_clock_;
  std::unique_ptr<HealthWatcher> watcher_;  // last: stopped before the above go
};

// The callback runs without the watcher's lock: it may read the watcher's
// own counters (a metrics scrape does, under the caller's lock) without a
// deadlock, and Stop() waits for a call in flight.
TEST_F(HealthWatcherTest, CallbackRunsWithoutTheWatchersLock) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(0);
  policy.wait_timeout = std::chrono::milliseconds(200);
  std::atomic<uint64_t> seen_in_callback{0};
  std::atomic<HealthWatcher*> self{nullptr};
  watcher_ = HealthWatcher::Start(lib_, uuids_, {}, policy, [&](const HealthChange&) {
    if (HealthWatcher* w = self.load()) {
      const auto counts = w->XidCounts();
      seen_in_callback = counts.count(79) ? counts.at(79) : 0;
    }
  });
  self = watcher_.get();
  Send("xid 3 79");
  ASSERT_TRUE(WaitFor([&] { return seen_in_callback.load() == 1; }));
  watcher_->Stop();
  self = nullptr;
}

// A GPU falls off the bus and NVML's event wait answers GPU_IS_LOST
// without saying which: every GPU is asked, the lost one marked, the rest
// left alone; it comes back once it answers again.
TEST_F(HealthWatcherTest, GpuIsLostFromTheWaitFindsTheLostGpu) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(300);
  StartWatcher(policy);
  Send("vanish 4");
  ASSERT_TRUE(WaitFor([&] { return !Changes().empty(); })) << "no GPU marked";
  auto c = Changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].key.uuid, uuids_[4]);
  EXPECT_FALSE(c[0].healthy);
  EXPECT_NE(c[0].reason.find("GPU_IS_LOST"), std::string::npos) << c[0].reason;
  Send("reset 4");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

// One GPU off the bus keeps no other out: each GPU is asked on its own
// handle (NVML answers a lookup by UUID with GPU_IS_LOST while any GPU is
// lost), so another GPU's recoverable XID still ends after its quiet period,
// and an XID on a third GPU is still seen.
TEST_F(HealthWatcherTest, AGpuOffTheBusKeepsNoOtherGpuOut) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  StartWatcher(policy);
  Send("vanish 4");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; })) << "no GPU marked";
  Send("xid 2 94");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 3; }))
      << "GPU 2 did not come back while GPU 4 is off the bus";
  auto c = Changes();
  EXPECT_EQ(c[0].key.uuid, uuids_[4]);
  EXPECT_EQ(c[1].key.uuid, uuids_[2]);
  EXPECT_FALSE(c[1].healthy);
  EXPECT_EQ(c[2].key.uuid, uuids_[2]);
  EXPECT_TRUE(c[2].healthy);
  Send("xid 6 79");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 4; }));
  EXPECT_EQ(Changes()[3].key.uuid, uuids_[6]);
  Send("reset 4");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 5; }));
  EXPECT_EQ(Changes()[4].key.uuid, uuids_[4]);
  EXPECT_TRUE(Changes()[4].healthy);
}

// The reset that brings a lost GPU back also drops its event registration
// (the driver's state for the GPU goes with a reset, and NVML cannot take
// one GPU out of a set): the watcher builds its event set afresh, so the
// GPU's next XID is seen and marks it again, and the other GPUs stay
// watched.
TEST_F(HealthWatcherTest, GpuResetAfterFallingOffTheBusIsWatchedAgain) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  StartWatcher(policy);
  Send("vanish 4");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; })) << "no GPU marked";
  Send("reset 4");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
  Send("xid 4 48");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 3; }))
      << "the XID after the reset was never seen";
  EXPECT_EQ(Changes()[2].key.uuid, uuids_[4]);
  EXPECT_FALSE(Changes()[2].healthy);
  EXPECT_EQ(Changes()[2].xid, 48);
  Send("xid 2 79");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 4; }));
  EXPECT_EQ(Changes()[3].key.uuid, uuids_[2]);
  EXPECT_EQ(watcher_->XidCounts(), (std::map<int, uint64_t>{{48, 1}, {79, 1}}));
}

// The quiet period is read on the watcher's clock: with the default of a
// minute, a GPU out for a recoverable XID stays out a second short of it and
// comes back once it has passed, stepped here rather than waited for. The
// thread comes round every wait_timeout (200 ms) of real time to look.
TEST_F(HealthWatcherTest, QuietPeriodIsReadOnTheWatchersClock) {
  gpu_agent::testing::FakeClock& clock = fake_clock_;  // outlives the watcher
  HealthPolicy policy;
  ASSERT_EQ(policy.recovery_period, std::chrono::minutes(1));
  StartWatcher(policy, {}, &clock);
  Send("xid 3 94");  // contained ECC: back after the quiet period
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  EXPECT_FALSE(Changes()[0].healthy);
  clock.Advance(std::chrono::seconds(59));
  EXPECT_FALSE(WaitFor([&] { return Changes().size() > 1; }, std::chrono::milliseconds(700)))
      << "back before the quiet period had passed";
  clock.Advance(std::chrono::seconds(2));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }, std::chrono::seconds(3)))
      << "not back once the quiet period had passed";
  EXPECT_TRUE(Changes()[1].healthy);
  EXPECT_EQ(Changes()[1].key.uuid, uuids_[3]);
}

// The liveness bound is read on the same clock: a thread that has not come
// round its loop for longer than 4 x wait_timeout + max_backoff of the
// watcher's time is reported, whatever the wall clock says.
TEST_F(HealthWatcherTest, LivenessBoundIsReadOnTheWatchersClock) {
  gpu_agent::testing::FakeClock& clock = fake_clock_;  // outlives the watcher
  HealthPolicy policy;
  policy.max_backoff = std::chrono::seconds(1);
  StartWatcher(policy, {}, &clock);  // wait_timeout 200 ms: bound 1.8 s
  std::string why;
  EXPECT_TRUE(watcher_->Alive(&why)) << why;
  Send("hang-wait");
  // Once the thread is blocked in its wait it no longer comes round to note
  // the time; the watcher's clock moving past the bound then shows it stuck
  // (steps of 10 s: the first may come before the thread reaches the wait).
  ASSERT_TRUE(WaitFor(
      [&] {
        clock.Advance(std::chrono::seconds(10));
        return !watcher_->Alive(&why);
      },
      std::chrono::milliseconds(1000)))  // under the 1.8 s bound of real time
      << "a hung wait went unnoticed on the watcher's clock";
  EXPECT_NE(why.find("has not come round its loop"), std::string::npos) << why;
  Send("unhang-wait");
  EXPECT_TRUE(WaitFor([&] { return watcher_->Alive(&why); })) << why;
}

// XIDs after which NVIDIA asks for a GPU reset: NVML keeps answering (48)
// or stops (79), and either way the GPU stays out through any number of
// quiet periods until NVML shows the reset.
TEST_F(HealthWatcherTest, XidNeedingAResetStaysOutUntilTheGpuIsReset) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  policy.wait_timeout = std::chrono::milliseconds(100);
  StartWatcher(policy);
  Send("xid 3 48");  // double-bit ECC: row remap pending, the driver asks for a reset
  Send("xid 5 79");  // off the bus
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_FALSE(WaitFor([&] { return Changes().size() > 2; }, std::chrono::seconds(1)))
      << "came back after " << Changes().back().reason;
  Send("reset 3");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 3; }));
  EXPECT_EQ(Changes()[2].key.uuid, uuids_[3]);
  EXPECT_TRUE(Changes()[2].healthy);
  Send("reset 5");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 4; }));
  EXPECT_EQ(Changes()[3].key.uuid, uuids_[5]);
  EXPECT_TRUE(Changes()[3].healthy);
}

// An XID that needs a reset on a GPU already out for a lesser one makes it
// need the reset.
TEST_F(HealthWatcherTest, AResetClassXidUpgradesAnOutage) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  policy.wait_timeout = std::chrono::milliseconds(100);
  StartWatcher(policy);
  Send("xid 3 94");  // contained ECC: back after the quiet period
  Send("xid 3 95");  // uncontained: needs a reset
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  EXPECT_FALSE(WaitFor([&] { return Changes().size() > 1; }, std::chrono::seconds(1)));
  Send("reset 3");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

// A reset still pending when the agent starts (it restarted meanwhile)
// keeps the GPU out from the start, until the reset.
TEST_F(HealthWatcherTest, AResetPendingAtStartKeepsTheGpuOut) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  policy.wait_timeout = std::chrono::milliseconds(100);
  Send("xid 3 48");  // before any watcher: the event goes nowhere, the remap stays pending
  StartWatcher(policy);
  ASSERT_EQ(Changes().size(), 1u) << "reported during Start";
  EXPECT_EQ(Changes()[0].key.uuid, uuids_[3]);
  EXPECT_FALSE(Changes()[0].healthy);
  EXPECT_NE(Changes()[0].reason.find("at start"), std::string::npos) << Changes()[0].reason;
  EXPECT_FALSE(WaitFor([&] { return Changes().size() > 1; }, std::chrono::seconds(1)));
  Send("reset 3");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

// Where NVML shows no sign of a reset (no recovery action, no row remap or
// page retirement status), only an operator's word brings the GPU back.
TEST_F(HealthWatcherTest, WithoutEvidenceAnOperatorVouches) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  policy.wait_timeout = std::chrono::milliseconds(100);
  StartWatcher(policy);
  // No recovery action (older than R550). Row remap and page retirement
  // answer, and show nothing pending, but that says nothing of an NVLink
  // error.
  Send("fail 2 nvmlDeviceGetFieldValues 3");  // NOT_SUPPORTED
  Send("xid 2 74");                           // NVLink error
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  Send("reset 2");  // reset, but NVML cannot show it
  EXPECT_FALSE(WaitFor([&] { return Changes().size() > 1; }, std::chrono::seconds(1)));
  watcher_->OperatorVouches();
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

// A reload starts a new watcher: what the old one had out stays out, with
// its class, and is not reported healthy on the way.
TEST_F(HealthWatcherTest, OutagesCarryAcrossAReload) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  policy.wait_timeout = std::chrono::milliseconds(100);
  StartWatcher(policy);
  Send("xid 4 48");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  watcher_->Stop();
  std::vector<HealthWatcher::Outage> carried = watcher_->Outages();
  ASSERT_EQ(carried.size(), 1u);
  EXPECT_EQ(carried[0].key.uuid, uuids_[4]);
  EXPECT_TRUE(carried[0].needs_reset);
  {
    std::lock_guard<std::mutex> lock(mu_);
    changes_.clear();
  }
  watcher_ = HealthWatcher::Start(
      lib_, uuids_, {}, policy,
      [this](const HealthChange& c) {
        std::lock_guard<std::mutex> lock(mu_);
        changes_.push_back(c);
      },
      carried);
  ASSERT_EQ(Changes().size(), 1u);  // reported out at once, during Start
  EXPECT_FALSE(Changes()[0].healthy);
  EXPECT_FALSE(WaitFor([&] { return Changes().size() > 1; }, std::chrono::seconds(1)));
  Send("reset 4");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

// An NVML call that hangs stops the health thread; Alive() says so once it
// has not come round its loop for 4 x wait_timeout, and recovers with it.
TEST_F(HealthWatcherTest, AHungNvmlCallShowsInAlive) {
  HealthPolicy policy;
  policy.wait_timeout = std::chrono::milliseconds(100);
  policy.max_backoff = std::chrono::milliseconds(200);
  StartWatcher(policy);
  std::string why;
  EXPECT_TRUE(watcher_->Alive(&why)) << why;
  Send("hang-wait");
  ASSERT_TRUE(WaitFor([&] { return !watcher_->Alive(&why); })) << "a hung wait went unnoticed";
  EXPECT_NE(why.find("an NVML call hangs"), std::string::npos) << why;
  Send("unhang-wait");
  ASSERT_TRUE(WaitFor([&] { return watcher_->Alive(&why); })) << why;
}

TEST_F(HealthWatcherTest, CriticalXidMarksThenQuietPeriodRecovers) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(300);
  StartWatcher(policy);
  Send("xid 13 3");  // wrong order on purpose: "13" is no GPU
  Send("xid 3 13");  // ignored by the default policy
  Send("xid 3 94");  // contained ECC error: the application restarts
  ASSERT_TRUE(WaitFor([&] { return !Changes().empty(); }));
  auto c = Changes();
  ASSERT_EQ(c.size(), 1u);  // XID 13 changed nothing
  EXPECT_EQ(c[0].key.uuid, uuids_[3]);
  EXPECT_FALSE(c[0].healthy);
  EXPECT_EQ(c[0].xid, 94);
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
  EXPECT_EQ(Changes()[1].key.uuid, uuids_[3]);
}

TEST_F(HealthWatcherTest, InstanceScopedXidNamesTheInstanceAndRecoversAlone) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(300);
  StartWatcher(policy);
  Send("xid 2 94 1 0");  // GPU instance 1, compute instance 0 on GPU 2
  Send("xid 2 94 4");    // GPU instance 4, any compute instance
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  auto c = Changes();
  EXPECT_EQ(c[0].key.uuid, uuids_[2]);
  EXPECT_EQ(c[0].key.gpu_instance, 1);
  EXPECT_EQ(c[0].key.compute_instance, 0);
  EXPECT_FALSE(c[0].healthy);
  EXPECT_EQ(c[1].key.gpu_instance, 4);
  EXPECT_EQ(c[1].key.compute_instance, -1);
  // A second XID on the same instance is not news; a GPU-wide one is.
  Send("xid 2 94 1 0");
  Send("xid 2 94");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() >= 3; }));
  c = Changes();
  EXPECT_EQ(c[2].key.gpu_instance, -1);
  EXPECT_FALSE(c[2].healthy);
  // All three come back after the quiet period, each on its own.
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 6; })) << Changes().size();
  c = Changes();
  std::set<std::pair<int, int>> back;
  for (size_t i = 3; i < c.size(); ++i) {
    EXPECT_TRUE(c[i].healthy);
    back.insert({c[i].key.gpu_instance, c[i].key.compute_instance});
  }
  EXPECT_EQ(back, (std::set<std::pair<int, int>>{{-1, -1}, {1, 0}, {4, -1}}));
}

TEST_F(HealthWatcherTest, CriticalListOverridesIgnoreList) {
  HealthPolicy policy;
  policy.critical_xids = {13};
  policy.recovery_period = std::chrono::milliseconds(0);
  StartWatcher(policy);
  Send("xid 1 13");
  ASSERT_TRUE(WaitFor([&] { return !Changes().empty(); }));
  EXPECT_EQ(Changes()[0].key.uuid, uuids_[1]);
}

TEST_F(HealthWatcherTest, LostGpuStaysOutUntilItIsReset) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  StartWatcher(policy);
  Send("lose 5");
  ASSERT_TRUE(WaitFor([&] { return !Changes().empty(); }));
  EXPECT_FALSE(Changes()[0].healthy);
  // Several recovery periods pass; the GPU still does not answer.
  EXPECT_FALSE(WaitFor([&] { return Changes().size() > 1; }, std::chrono::milliseconds(700)));
  Send("reset 5");
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

TEST_F(HealthWatcherTest, InitiallyUnhealthyGpuIsReportedAndProbed) {
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  StartWatcher(policy, {uuids_[2]});
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_FALSE(Changes()[0].healthy);
  EXPECT_TRUE(Changes()[1].healthy);  // NVML answers for it
}

TEST_F(HealthWatcherTest, FailingWaitBacksOffInsteadOfSpinning) {
  HealthPolicy policy;
  StartWatcher(policy);
  // The first poll (its drains of the event set after each GPU) is done:
  // from here each turn of the loop makes one wait.
  ASSERT_TRUE(WaitFor([&] { return watcher_->Polls() >= 1; }));
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  const auto sent = std::chrono::steady_clock::now();
  // Three failing waits, then an XID (one that leaves the GPU answering):
  // it is seen only once the loop has come through the failures, after
  // backing off 100, 200 and 400 ms (each jittered by up to 20 %, so at
  // least 560 ms in all); a spinning loop comes through them at once,
  // burning the CPU.
  Send("wait-error 999 3");
  Send("xid 0 94");
  ASSERT_TRUE(WaitFor([&] { return !Changes().empty(); }, std::chrono::seconds(15)));
  const auto took = std::chrono::steady_clock::now() - sent;
  EXPECT_NE(Changes()[0].reason.find("XID 94"), std::string::npos) << Changes()[0].reason;
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  auto ms = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000 +
           (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1000;
  };
  EXPECT_GE(took, std::chrono::milliseconds(560)) << "the failing waits were not backed off";
  // WaitFor itself polls every 2 ms; allow for that, not for a spin.
  EXPECT_LT(ms(after) - ms(before), 300);
}

TEST_F(HealthWatcherTest, NoReportsAfterStop) {
  HealthPolicy policy;
  StartWatcher(policy);
  watcher_->Stop();
  Send("xid 0 79");
  EXPECT_FALSE(WaitFor([&] { return !Changes().empty(); }, std::chrono::milliseconds(400)));
}

// In a container without privilege NVML refuses the memory of a
// MIG-enabled GPU, the query the watcher asks whether a GPU answers. The
// refusal is no sign of ill health: a MIG GPU out for a recoverable XID
// comes back after the quiet period.
TEST(HealthWatcherUnprivilegedTest, MigGpuComesBackAfterARecoverableXid) {
  TempDir dir;
  std::filesystem::create_directories(dir.Join("usr/lib64"));
  std::filesystem::create_symlink(FakeNvmlDir() + "/libnvidia-ml.so.1",
                                  dir.Join("usr/lib64/libnvidia-ml.so.1"));
  const std::string fixture =
      dir.Write("f.yaml", "privileged: false\n" +
                              gpu_agent::testing::ReadFile(FixturePath("2-gpu-mig.yaml")));
  ::setenv("FAKE_NVML_FIXTURE", fixture.c_str(), 1);
  const std::string ctl = dir.Join("ctl");
  ::setenv("FAKE_NVML_CONTROL", ctl.c_str(), 1);
  auto opened = NvmlLibrary::Open(dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE((*opened)->Init().ok());
  std::shared_ptr<const NvmlLibrary> lib(std::move(*opened));
  auto inv = nvml::DiscoverInventory(*lib, "/nonexistent");
  ASSERT_TRUE(inv.ok());
  ASSERT_TRUE(inv->gpus[0].mig_enabled);
  std::mutex mu;
  std::vector<HealthChange> changes;
  HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(100);
  policy.wait_timeout = std::chrono::milliseconds(100);
  auto watcher = HealthWatcher::Start(lib, {inv->gpus[0].uuid, inv->gpus[1].uuid}, {}, policy,
                                      [&](const HealthChange& c) {
                                        std::lock_guard<std::mutex> lock(mu);
                                        changes.push_back(c);
                                      });
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return changes.size();
  };
  ASSERT_TRUE(WriteFifo(ctl, "xid 0 8"));
  EXPECT_TRUE(WaitFor([&] { return count() == 2; })) << "changes: " << count();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(changes.size(), 2u);
    if (changes.size() == 2) {
      EXPECT_FALSE(changes[0].healthy);
      EXPECT_TRUE(changes[1].healthy);
      EXPECT_EQ(changes[1].key.uuid, inv->gpus[0].uuid);
    }
  }
  // As the fixture's cases do: the thread joined, NVML let go before the
  // next case starts it on its own fixture.
  watcher.reset();
  lib.reset();
  EXPECT_EQ(HealthWatcher::JoinStopped(std::chrono::seconds(10)), 0);
}

// Stop() does not wait out NVML's event wait, which cannot be interrupted
// (a reload or SIGTERM would wait up to wait_timeout, or for good on a hung
// NVML call): it returns with no report after it, and the watcher can go at
// once (ASan and TSan builds check that the thread, which ends when its
// wait returns, uses nothing of it). The thread is joined once it ended.
TEST_F(HealthWatcherTest, StopIsPromptAndTheThreadIsJoinedOnceItsWaitReturns) {
  ASSERT_EQ(HealthWatcher::JoinStopped(std::chrono::seconds(10)), 0);
  ASSERT_EQ(HealthWatcher::ThreadsRunning(), 0);
  HealthPolicy policy;
  policy.wait_timeout = std::chrono::seconds(3);
  watcher_ = HealthWatcher::Start(lib_, uuids_, {}, policy, [this](const HealthChange& c) {
    std::lock_guard<std::mutex> lock(mu_);
    changes_.push_back(c);
  });
  ASSERT_TRUE(WaitFor([] { return HealthWatcher::ThreadsRunning() == 1; }));
  Send("xid 3 79");  // the thread has come round its loop once this is seen
  ASSERT_TRUE(WaitFor([&] { return !Changes().empty(); }));
  const auto asked = std::chrono::steady_clock::now();
  watcher_->Stop();
  const auto took = std::chrono::steady_clock::now() - asked;
  // The thread is in a wait of up to 3 s: Stop() did not wait for it.
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  const size_t reported = Changes().size();
  watcher_->Stop();  // a second Stop() hands nothing over again
  watcher_.reset();
  Send("xid 4 79");  // not reported: the watcher is stopped
  EXPECT_EQ(HealthWatcher::JoinStopped(policy.wait_timeout + std::chrono::seconds(5)), 0);
  EXPECT_EQ(HealthWatcher::ThreadsRunning(), 0);
  EXPECT_EQ(Changes().size(), reported);
}

TEST(HealthPolicyTest, DefaultIgnoreList) {
  HealthPolicy p;
  for (int xid : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(p.IsCritical(xid)) << xid;
  for (int xid : {48, 63, 64, 74, 79, 94, 95}) EXPECT_TRUE(p.IsCritical(xid)) << xid;
}

}  // namespace
}  // namespace gpu_agent::health
