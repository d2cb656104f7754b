// The polled checks inside the health watcher, on the NVML stand-in driven
// through its control FIFO, with a fake clock for the poll interval and the
// quiet period: a check failing at severity unhealthy takes its GPU out
// through the same path as a reset-class XID (one whole-GPU outage, which
// covers its MIG devices and replicas), a degraded one only reports, and a
// GPU comes back only once the check passes and its evidence rules hold.
#include <gtest/gtest.h>

#include <mutex>

#include "health/health_watcher.h"
#include "health/stand_in_nvml.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"
#include "support/fake_clock.h"
#include "support/test_support.h"

namespace gpu_agent::health {
namespace {

using gpu_agent::testing::FakeClock;
using gpu_agent::testing::TempDir;
using gpu_agent::testing::WaitFor;
using gpu_agent::testing::WriteFifo;
using nvml::NvmlLibrary;
using nvml::OpenStandInNvml;
using nvml::StandInNvml;
using std::chrono::milliseconds;
using std::chrono::seconds;

class HealthCheckWatchTest : public ::testing::Test {
 protected:
  void Open(const std::string& fixture) {
    StandInNvml nvml;
    OpenStandInNvml(dir_, fixture, &nvml);
    lib_ = nvml.lib;
    uuids_ = nvml.uuids;
    ctl_ = nvml.ctl;
  }

  // Each case ends with its watcher's thread joined, and so with NVML let go.
  void TearDown() override {
    watcher_.reset();
    EXPECT_EQ(HealthWatcher::JoinStopped(std::chrono::seconds(10)), 0);
  }

  // Polls every 10 s and a quiet period of 1 m, on the fake clock.
  void Start(CheckSettings checks = CheckSettings::Defaults()) {
    HealthPolicy policy;
    policy.wait_timeout = milliseconds(50);
    policy.poll_interval = seconds(10);
    policy.recovery_period = seconds(60);
    policy.checks = checks;
    watcher_ = HealthWatcher::Start(
        lib_, uuids_, {}, policy,
        [this](const HealthChange& c) {
          std::lock_guard<std::mutex> lock(mu_);
          changes_.push_back(c);
        },
        {}, &clock_,
        [this](const CheckChange& c) {
          std::lock_guard<std::mutex> lock(mu_);
          check_changes_.push_back(c);
        });
    ASSERT_TRUE(WaitFor([&] { return watcher_->Polls() >= 1; })) << "no first poll";
  }

  // Moves the clock by `d` and waits for the poll that is then due.
  void Step(std::chrono::milliseconds d) {
    const uint64_t polls = watcher_->Polls();
    clock_.Advance(d);
    ASSERT_TRUE(WaitFor([&] { return watcher_->Polls() > polls; })) << "no poll";
  }

  std::vector<HealthChange> Changes() {
    std::lock_guard<std::mutex> lock(mu_);
    return changes_;
  }
  std::vector<CheckChange> CheckChanges() {
    std::lock_guard<std::mutex> lock(mu_);
    return check_changes_;
  }
  void Send(const std::string& line) { ASSERT_TRUE(WriteFifo(ctl_, line)) << line; }

  TempDir dir_;
  std::string ctl_;
  FakeClock clock_;
  std::shared_ptr<const NvmlLibrary> lib_;
  std::vector<std::string> uuids_;
  std::mutex mu_;
  std::vector<HealthChange> changes_;
  std::vector<CheckChange> check_changes_;
  std::unique_ptr<HealthWatcher> watcher_;  // last: stopped before the above go
};

TEST_F(HealthCheckWatchTest, AHealthyNodeReportsNothing) {
  Open("8-gpu-nvlink.yaml");
  Start();
  Step(seconds(10));
  Step(seconds(10));
  EXPECT_TRUE(Changes().empty());
  EXPECT_TRUE(CheckChanges().empty());
  // Every GPU's judged checks are there to be shown (metrics, report).
  std::set<std::string> seen;
  for (const CheckStatus& s : watcher_->Checks()) {
    EXPECT_EQ(s.level, Severity::kOk);
    seen.insert(s.uuid);
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_LE(watcher_->PollCalls(), watcher_->Polls() * 8 * 10);
}

TEST_F(HealthCheckWatchTest, DegradedReportsButLeavesTheGpuIn) {
  Open("8-gpu-pcie.yaml");
  Start();
  Send("set 5 pcieWidth 4");
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return CheckChanges().size() == 1; }));
  CheckChange c = CheckChanges()[0];
  EXPECT_EQ(c.now.uuid, uuids_[5]);
  EXPECT_EQ(c.now.check, CheckId::kPcieWidth);
  EXPECT_EQ(c.now.level, Severity::kDegraded);
  EXPECT_EQ(c.before, Severity::kOk);
  EXPECT_EQ(c.now.value, "x4 of x16");
  EXPECT_EQ(c.now.number, 4);
  Step(seconds(10));  // still degraded: no second report
  EXPECT_EQ(CheckChanges().size(), 1u);
  EXPECT_TRUE(Changes().empty()) << "a degraded GPU stays allocatable";
  Send("set 5 pcieWidth 16");
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return CheckChanges().size() == 2; }));
  EXPECT_EQ(CheckChanges()[1].now.level, Severity::kOk);
  EXPECT_EQ(CheckChanges()[1].before, Severity::kDegraded);
}

TEST_F(HealthCheckWatchTest, IgnoreShowsNothing) {
  Open("8-gpu-pcie.yaml");
  CheckSettings s = CheckSettings::Defaults();
  s[CheckId::kPcieWidth].severity = Severity::kOk;
  Start(s);
  Send("set 5 pcieWidth 4");
  Step(seconds(10));
  Step(seconds(10));
  EXPECT_TRUE(CheckChanges().empty());
  EXPECT_TRUE(Changes().empty());
}

// The driver asks for a reset: out as after a reset-class XID, the whole
// GPU (its MIG devices and replicas with it); quiet periods pass and it
// stays out; a reset clears the action and it comes back.
TEST_F(HealthCheckWatchTest, UnhealthyTakesTheWholeGpuOutUntilTheEvidenceRulesHold) {
  Open("2-gpu-mig.yaml");
  Start();
  Send("set 0 recoveryAction 1");
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  HealthChange out = Changes()[0];
  EXPECT_FALSE(out.healthy);
  EXPECT_EQ(out.key, DeviceKey::Gpu(uuids_[0]));
  EXPECT_TRUE(out.key.Covers(DeviceKey{uuids_[0], 1, 0})) << "a MIG device of GPU 0";
  EXPECT_EQ(out.reason, "health check recoveryAction: GPU reset");
  ASSERT_EQ(watcher_->Outages().size(), 1u);
  EXPECT_TRUE(watcher_->Outages()[0].needs_reset);
  // Several quiet periods: still out.
  for (int i = 0; i < 3; ++i) Step(seconds(60));
  EXPECT_EQ(Changes().size(), 1u);
  Send("reset 0");
  Step(seconds(60));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; })) << "not back after the reset";
  EXPECT_TRUE(Changes()[1].healthy);
  EXPECT_EQ(Changes()[1].key, DeviceKey::Gpu(uuids_[0]));
}

// A condition set to unhealthy (not reset-class): back after the quiet
// period once it passes, never while it still fails.
TEST_F(HealthCheckWatchTest, UnhealthyConditionComesBackOnlyOnceItPasses) {
  Open("8-gpu-pcie.yaml");
  CheckSettings s = CheckSettings::Defaults();
  s[CheckId::kTemperature].severity = Severity::kUnhealthy;
  Start(s);
  Send("set 2 temperature 90");
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  EXPECT_EQ(Changes()[0].key, DeviceKey::Gpu(uuids_[2]));
  EXPECT_FALSE(Changes()[0].healthy);
  EXPECT_FALSE(watcher_->Outages()[0].needs_reset);
  for (int i = 0; i < 3; ++i) Step(seconds(60));
  EXPECT_EQ(Changes().size(), 1u) << "back while still hot";
  Send("set 2 temperature 60");
  Step(seconds(10));
  Step(seconds(60));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

// SIGUSR1 (an operator vouching for a reset) brings back a GPU whose check
// still fails, as for a reset-class XID; that check holds it out again only
// once it has passed and fails anew.
TEST_F(HealthCheckWatchTest, AnOperatorsWordHoldsUntilTheCheckFailsAnew) {
  Open("8-gpu-nvlink.yaml");
  Send("set 1 nvlinkStateField true");  // every link every poll, as on Hopper
  Start();
  Send("set 1 nvlinksDown 0");
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  EXPECT_EQ(Changes()[0].reason, "health check nvlink: 1 of 6 links down (0)");
  for (int i = 0; i < 3; ++i) Step(seconds(60));
  EXPECT_EQ(Changes().size(), 1u) << "back while the link is down";
  watcher_->OperatorVouches();
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
  Step(seconds(10));
  Step(seconds(10));
  EXPECT_EQ(Changes().size(), 2u) << "the same failure took it out again";
  Send("set 1 nvlinksDown 9");  // link 9 was never up: not watched; link 0 is back
  Step(seconds(10));
  // The returning GPU's own judgement counts as a poll too: wait for the
  // clocked poll that sees the check pass before the link goes down again.
  ASSERT_TRUE(WaitFor([&] {
    for (const CheckChange& c : CheckChanges()) {
      if (c.now.uuid == uuids_[1] && c.now.check == CheckId::kNvLink &&
          c.now.level == Severity::kOk) {
        return true;
      }
    }
    return false;
  }));
  Send("set 1 nvlinksDown 0");
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 3; }));
  EXPECT_FALSE(Changes()[2].healthy);
}

// A reset-class XID and a failing check on the same GPU: one outage, the
// XID's reason and evidence rules kept.
TEST_F(HealthCheckWatchTest, AnXidOutageKeepsItsReasonWhenACheckFailsToo) {
  Open("8-gpu-pcie.yaml");
  Start();
  Send("xid 4 48");  // leaves the driver asking for a reset, and an ECC error counted
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 1; }));
  Step(seconds(10));
  Step(seconds(10));
  ASSERT_EQ(Changes().size(), 1u);
  ASSERT_EQ(watcher_->Outages().size(), 1u);
  EXPECT_EQ(watcher_->Outages()[0].xid, 48);
  EXPECT_EQ(watcher_->Outages()[0].reason, "XID 48");
  Send("reset 4");
  Step(seconds(60));
  ASSERT_TRUE(WaitFor([&] { return Changes().size() == 2; }));
  EXPECT_TRUE(Changes()[1].healthy);
}

TEST_F(HealthCheckWatchTest, AGpuFoundLostByAPollIsOutAsLost) {
  Open("8-gpu-pcie.yaml");
  Start();
  // Only a polled query sees it (the event wait does not answer GPU_IS_LOST).
  Send("fail 6 nvmlDeviceGetTemperature 15");
  Step(seconds(10));
  ASSERT_TRUE(WaitFor([&] { return !Changes().empty(); }));
  EXPECT_EQ(Changes()[0].key, DeviceKey::Gpu(uuids_[6]));
  EXPECT_NE(Changes()[0].reason.find("GPU_IS_LOST"), std::string::npos);
}

}  // namespace
}  // namespace gpu_agent::health
