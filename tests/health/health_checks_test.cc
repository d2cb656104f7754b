// The polled health checks (health/health_poller.h, gpu_checks.h) against the
// in-process NVML with a fake clock: each check's verdict, its threshold,
// counters judged as deltas and rates, and the false-alarm cases (no NVLink
// check on a PCIe-only GPU, no ECC check with ECC off, NOT_SUPPORTED turns
// a check off, not the GPU).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fixture.h"
#include "health/health_poller.h"
#include "in_process_nvml.h"
#include "nvml/gpu_handles.h"
#include "nvml/nvml_library.h"
#include "support/fake_clock.h"
#include "support/test_support.h"

namespace gpu_agent::health {
namespace {

using gpu_agent::testing::FakeClock;
using gpu_agent::testing::FixturePath;
using nvml::GpuHandles;
using nvml::NvmlLibrary;
using std::chrono::seconds;

fake_nvml::Fixture Load(const std::string& name) {
  fake_nvml::Fixture fixture;
  std::string error;
  EXPECT_TRUE(fake_nvml::LoadFixture(FixturePath(name), &fixture, &error)) << error;
  return fixture;
}

// A fixture's GPUs polled through the in-process NVML.
class Polled {
 public:
  explicit Polled(const std::string& fixture, CheckSettings settings = CheckSettings::Defaults())
      : fake_(Load(fixture)), lib_(fake_.Library()) {
    EXPECT_TRUE(lib_->Init().ok());
    for (const fake_nvml::GpuFixture& g : Load(fixture).gpus) uuids_.push_back(g.uuid);
    handles_ = std::make_unique<GpuHandles>(*lib_, uuids_);
    poller_ = std::make_unique<HealthPoller>(*lib_, handles_.get(), uuids_, settings, &clock_);
  }

  fake_nvml::InProcessNvml& fake() { return fake_; }
  FakeClock& clock() { return clock_; }
  HealthPoller& poller() { return *poller_; }
  size_t gpus() const { return uuids_.size(); }

  std::vector<GpuVerdict> Poll() { return poller_->Poll(); }
  // GPU `gpu`'s result for `id` at the next poll.
  CheckResult Next(unsigned gpu, CheckId id) {
    std::vector<GpuVerdict> v = Poll();
    EXPECT_LT(gpu, v.size());
    for (const CheckResult& r : v[gpu].results) {
      if (r.id == id) return r;
    }
    ADD_FAILURE() << "no result for " << Spec(id).name;
    return {};
  }
  void Set(unsigned gpu, const std::string& field, const std::string& value) {
    ASSERT_TRUE(fake_.Set(gpu, field, value)) << field << "=" << value;
  }

 private:
  fake_nvml::InProcessNvml fake_;
  std::unique_ptr<NvmlLibrary> lib_;
  FakeClock clock_;
  std::vector<std::string> uuids_;
  std::unique_ptr<GpuHandles> handles_;
  std::unique_ptr<HealthPoller> poller_;
};

#define EXPECT_STATE(result, want)                                                   \
  EXPECT_EQ(CheckStateName((result).state), CheckStateName(want))                    \
      << Spec((result).id).name << ": value \"" << (result).value << "\", detail \"" \
      << (result).detail << "\""

TEST(HealthChecksTest, AHealthyIdleGpuPassesEveryCheckItHas) {
  Polled p("8-gpu-nvlink.yaml");
  std::vector<GpuVerdict> v = p.Poll();
  ASSERT_EQ(v.size(), 8u);
  for (const GpuVerdict& g : v) {
    ASSERT_FALSE(g.lost);
    ASSERT_EQ(g.results.size(), kCheckCount);
    for (const CheckResult& r : g.results) {
      EXPECT_NE(r.state, CheckState::kFailing) << Spec(r.id).name << ": " << r.value;
      EXPECT_NE(r.state, CheckState::kUnknown) << Spec(r.id).name << ": " << r.detail;
    }
  }
  // Counters only set their baseline at the first poll; the second judges.
  p.clock().Advance(seconds(30));
  const std::vector<GpuVerdict> second = p.Poll();
  for (const CheckResult& r : second[0].results) {
    EXPECT_NE(r.state, CheckState::kBaseline) << Spec(r.id).name;
  }
}

TEST(HealthChecksTest, NoNvLinkCheckOnAPcieOnlyGpu) {
  Polled p("8-gpu-pcie.yaml");
  const CheckResult r = p.Next(0, CheckId::kNvLink);
  EXPECT_STATE(r, CheckState::kOff);
  EXPECT_NE(r.detail.find("PCIe-only"), std::string::npos) << r.detail;
}

TEST(HealthChecksTest, NoEccCheckWhereEccIsOffAndTheCounterIsNotRead) {
  Polled p("1-gpu.yaml");
  p.Set(0, "ecc", "false");
  p.Set(0, "eccUncorrected", "5");
  const CheckResult r = p.Next(0, CheckId::kEccUncorrectable);
  EXPECT_STATE(r, CheckState::kOff);
  EXPECT_EQ(r.detail, "ECC is off on this GPU");
  // Failing the counter's query changes nothing: it is not asked.
  p.fake().Fail(0, "nvmlDeviceGetTotalEccErrors", 999);
  EXPECT_STATE(p.Next(0, CheckId::kEccUncorrectable), CheckState::kOff);
}

TEST(HealthChecksTest, NotSupportedTurnsTheCheckOffNotTheGpu) {
  Polled p("1-gpu.yaml");
  p.fake().Fail(0, "nvmlDeviceGetTemperatureThreshold", NVML_ERROR_NOT_SUPPORTED);
  std::vector<GpuVerdict> v = p.Poll();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].lost);
  for (const CheckResult& r : v[0].results) {
    if (r.id == CheckId::kTemperature) {
      EXPECT_STATE(r, CheckState::kOff);
      ASSERT_FALSE(r.raw.empty());
      EXPECT_EQ(r.raw[0].second, "not supported");
    } else {
      EXPECT_NE(r.state, CheckState::kFailing) << Spec(r.id).name;
    }
  }
  // Asked once, at discovery: the threshold answering later changes nothing.
  p.fake().Fail(0, "nvmlDeviceGetTemperatureThreshold", 0);
  p.Set(0, "temperature", "99");
  EXPECT_STATE(p.Next(0, CheckId::kTemperature), CheckState::kOff);
}

TEST(HealthChecksTest, AnotherErrorIsUnknownForThatPollOnly) {
  Polled p("1-gpu.yaml");
  p.fake().Fail(0, "nvmlDeviceGetTemperature", NVML_ERROR_UNKNOWN);
  EXPECT_STATE(p.Next(0, CheckId::kTemperature), CheckState::kUnknown);
  p.fake().Fail(0, "nvmlDeviceGetTemperature", 0);
  EXPECT_STATE(p.Next(0, CheckId::kTemperature), CheckState::kPass);
}

TEST(HealthChecksTest, UncorrectableEccIsJudgedAsNewErrorsSinceTheLastPoll) {
  Polled p("1-gpu.yaml");
  p.Set(0, "eccUncorrected", "7");  // from before the agent started: a baseline, not a failure
  EXPECT_STATE(p.Next(0, CheckId::kEccUncorrectable), CheckState::kBaseline);
  p.clock().Advance(seconds(30));
  EXPECT_STATE(p.Next(0, CheckId::kEccUncorrectable), CheckState::kPass);
  p.Set(0, "eccUncorrected", "8");
  p.clock().Advance(seconds(30));
  CheckResult r = p.Next(0, CheckId::kEccUncorrectable);
  EXPECT_STATE(r, CheckState::kFailing);
  EXPECT_EQ(r.value, "1 new since the last poll (8 in all)");
  p.clock().Advance(seconds(30));
  EXPECT_STATE(p.Next(0, CheckId::kEccUncorrectable), CheckState::kPass);
  // A reset clears the volatile count: a new baseline, not a negative delta.
  p.Set(0, "eccUncorrected", "0");
  EXPECT_STATE(p.Next(0, CheckId::kEccUncorrectable), CheckState::kBaseline);
}

TEST(HealthChecksTest, EccThresholdCountsNewErrorsPerPoll) {
  CheckSettings s = CheckSettings::Defaults();
  s[CheckId::kEccUncorrectable].threshold = 3;
  Polled p("1-gpu.yaml", s);
  p.Next(0, CheckId::kEccUncorrectable);
  p.Set(0, "eccUncorrected", "2");
  EXPECT_STATE(p.Next(0, CheckId::kEccUncorrectable), CheckState::kPass);
  p.Set(0, "eccUncorrected", "5");
  EXPECT_STATE(p.Next(0, CheckId::kEccUncorrectable), CheckState::kFailing);
}

TEST(HealthChecksTest, PcieReplaysAreJudgedAsARatePerMinute) {
  Polled p("1-gpu.yaml");  // threshold 8 a minute
  p.Set(0, "pcieReplays", "1000");
  EXPECT_STATE(p.Next(0, CheckId::kPcieReplays), CheckState::kBaseline);
  p.clock().Advance(seconds(30));
  p.Set(0, "pcieReplays", "1003");  // 6 a minute
  CheckResult r = p.Next(0, CheckId::kPcieReplays);
  EXPECT_STATE(r, CheckState::kPass);
  EXPECT_EQ(r.value, "3 in 30 s (6 a minute)");
  p.clock().Advance(seconds(30));
  p.Set(0, "pcieReplays", "1007");  // 8 a minute
  EXPECT_STATE(p.Next(0, CheckId::kPcieReplays), CheckState::kFailing);
  // The same 4 over a longer interval is a lower rate.
  p.clock().Advance(seconds(120));
  p.Set(0, "pcieReplays", "1011");
  EXPECT_STATE(p.Next(0, CheckId::kPcieReplays), CheckState::kPass);
}

TEST(HealthChecksTest, TemperatureAgainstTheGpusOwnThresholds) {
  Polled p("1-gpu.yaml");  // slowdown 87, shutdown 92
  p.Set(0, "temperature", "86");
  EXPECT_STATE(p.Next(0, CheckId::kTemperature), CheckState::kPass);
  p.Set(0, "temperature", "87");
  CheckResult r = p.Next(0, CheckId::kTemperature);
  EXPECT_STATE(r, CheckState::kFailing);
  EXPECT_EQ(r.value, "87 C (slowdown at 87 C, shutdown at 92 C)");
  p.Set(0, "temperature", "92");
  EXPECT_NE(p.Next(0, CheckId::kTemperature).value.find("at the shutdown temperature"),
            std::string::npos);
  p.Set(0, "slowdownTemperature", "95");  // thresholds are read once: no change
  EXPECT_STATE(p.Next(0, CheckId::kTemperature), CheckState::kFailing);
}

TEST(HealthChecksTest, TemperatureThresholdIsAMarginBelowSlowdown) {
  CheckSettings s = CheckSettings::Defaults();
  s[CheckId::kTemperature].threshold = 5;
  Polled p("1-gpu.yaml", s);
  p.Set(0, "temperature", "81");
  EXPECT_STATE(p.Next(0, CheckId::kTemperature), CheckState::kPass);
  p.Set(0, "temperature", "82");
  EXPECT_STATE(p.Next(0, CheckId::kTemperature), CheckState::kFailing);
}

TEST(HealthChecksTest, ClockEventsCountOnlyHardwareSlowdowns) {
  Polled p("1-gpu.yaml");
  p.Set(0, "clockEventReasons", "0x4");  // software power cap: normal under load
  EXPECT_STATE(p.Next(0, CheckId::kClockEvents), CheckState::kPass);
  p.Set(0, "clockEventReasons", "0x20");  // software thermal slowdown
  EXPECT_STATE(p.Next(0, CheckId::kClockEvents), CheckState::kPass);
  for (const auto& [mask, name] :
       std::vector<std::pair<std::string, std::string>>{{"0x8", "hardware slowdown"},
                                                        {"0x40", "hardware thermal slowdown"},
                                                        {"0x80", "power brake"}}) {
    p.Set(0, "clockEventReasons", mask);
    CheckResult r = p.Next(0, CheckId::kClockEvents);
    EXPECT_STATE(r, CheckState::kFailing);
    EXPECT_EQ(r.value, name);
  }
}

TEST(HealthChecksTest, AnNvLinkUpAtDiscoveryGoneDown) {
  Polled p("8-gpu-nvlink.yaml");
  p.Set(0, "nvlinkStateField", "true");  // every link every poll, as on Hopper
  EXPECT_STATE(p.Next(0, CheckId::kNvLink), CheckState::kPass);
  p.Set(0, "nvlinksDown", "2");
  CheckResult r = p.Next(0, CheckId::kNvLink);
  EXPECT_STATE(r, CheckState::kFailing);
  EXPECT_EQ(r.value, "1 of 6 links down (2)");
  EXPECT_STATE(p.Next(1, CheckId::kNvLink), CheckState::kPass);  // its peer's check is its own
  p.Set(0, "nvlinksDown", "");
  EXPECT_STATE(p.Next(0, CheckId::kNvLink), CheckState::kPass);
}

TEST(HealthChecksTest, ALinkDownAtDiscoveryIsNotWatched) {
  Polled p("8-gpu-nvlink.yaml");
  p.Set(0, "nvlinksDown", "0");
  CheckResult r = p.Next(0, CheckId::kNvLink);
  EXPECT_STATE(r, CheckState::kPass);
  EXPECT_EQ(r.value, "0 of 5 links down");
}

TEST(HealthChecksTest, NvLinkThresholdCountsLinksDown) {
  CheckSettings s = CheckSettings::Defaults();
  s[CheckId::kNvLink].threshold = 2;
  Polled p("8-gpu-nvlink.yaml", s);
  p.Set(0, "nvlinkStateField", "true");
  p.Poll();
  p.Set(0, "nvlinksDown", "1");
  EXPECT_STATE(p.Next(0, CheckId::kNvLink), CheckState::kPass);
  p.Set(0, "nvlinksDown", "1,3");
  EXPECT_STATE(p.Next(0, CheckId::kNvLink), CheckState::kFailing);
}

// NVLink calls of one poll of the 8 V100s (6 links up each).
uint64_t NvLinkPollCalls(bool by_field) {
  Polled p("8-gpu-nvlink.yaml");
  for (unsigned i = 0; i < p.gpus(); ++i) {
    p.Set(i, "nvlinkStateField", by_field ? "true" : "false");
  }
  p.Poll();  // facts, read at the first poll, see the setting above
  const uint64_t before = p.poller().poll_calls();
  p.Poll();
  return p.poller().poll_calls() - before;
}

TEST(HealthChecksTest, NvLinkStateByLinkReadsTwoLinksAPollInTurn) {
  // Without the field value, one call a link: two links a poll, so a poll
  // stays within 10 calls a GPU (with the field: all links in the call
  // that reads the recovery action).
  EXPECT_EQ(NvLinkPollCalls(false), NvLinkPollCalls(true) + 8 * 2);
  Polled p("8-gpu-nvlink.yaml");
  p.Set(0, "nvlinkStateField", "false");
  p.Poll();
  p.Set(0, "nvlinksDown", "4");
  // Links 0-5 are read two a poll: link 4 within three polls.
  int polls = 0;
  CheckResult r;
  do {
    r = p.Next(0, CheckId::kNvLink);
    ++polls;
  } while (r.state != CheckState::kFailing && polls < 3);
  EXPECT_STATE(r, CheckState::kFailing);
  EXPECT_EQ(r.value, "1 of 6 links down (4)");
  // Links not read this poll keep their last answer: still failing.
  EXPECT_STATE(p.Next(0, CheckId::kNvLink), CheckState::kFailing);
}

TEST(HealthChecksTest, PcieWidthBelowTheMaximum) {
  Polled p("1-gpu.yaml");
  p.Set(0, "pcieWidth", "8");
  CheckResult r = p.Next(0, CheckId::kPcieWidth);
  EXPECT_STATE(r, CheckState::kFailing);
  EXPECT_EQ(r.value, "x8 of x16");
}

TEST(HealthChecksTest, PcieGenerationIsJudgedOnlyWhileTheGpuIsBusy) {
  Polled p("1-gpu.yaml");
  p.Set(0, "pcieGeneration", "1");  // idle (the default): the link trained down to save power
  EXPECT_STATE(p.Next(0, CheckId::kPcieGeneration), CheckState::kPass);
  p.Set(0, "clockEventReasons", "0");
  CheckResult r = p.Next(0, CheckId::kPcieGeneration);
  EXPECT_STATE(r, CheckState::kFailing);
  EXPECT_EQ(r.value, "gen 1 of gen 4");
  p.fake().Fail(0, "nvmlDeviceGetCurrentClocksEventReasons", NVML_ERROR_UNKNOWN);
  EXPECT_STATE(p.Next(0, CheckId::kPcieGeneration), CheckState::kUnknown);
}

TEST(HealthChecksTest, RecoveryActionNamesWhatTheDriverAsks) {
  Polled p("1-gpu.yaml");
  EXPECT_EQ(p.Next(0, CheckId::kRecoveryAction).value, "none");
  p.Set(0, "recoveryAction", "2");
  CheckResult r = p.Next(0, CheckId::kRecoveryAction);
  EXPECT_STATE(r, CheckState::kFailing);
  EXPECT_EQ(r.value, "node reboot");
}

TEST(HealthChecksTest, RowRemapPendingAndFailed) {
  Polled p("1-gpu.yaml");
  p.Set(0, "remapPending", "true");
  EXPECT_STATE(p.Next(0, CheckId::kRowRemapPending), CheckState::kFailing);
  EXPECT_STATE(p.Next(0, CheckId::kRowRemapFailed), CheckState::kPass);
  p.Set(0, "remapFailed", "true");
  EXPECT_STATE(p.Next(0, CheckId::kRowRemapFailed), CheckState::kFailing);
}

TEST(HealthChecksTest, RetiredPagesOnlyWhereRowsAreNotRemapped) {
  Polled p("1-gpu.yaml");
  p.Set(0, "pagesPending", "true");
  EXPECT_STATE(p.Next(0, CheckId::kRetiredPagesPending), CheckState::kOff);
  p.Set(0, "rowRemapping", "false");  // a GPU before Ampere
  EXPECT_STATE(p.Next(0, CheckId::kRetiredPagesPending), CheckState::kFailing);
  EXPECT_STATE(p.Next(0, CheckId::kRowRemapPending), CheckState::kOff);
}

TEST(HealthChecksTest, ALostGpuIsReportedLostWithoutVerdicts) {
  Polled p("8-gpu-pcie.yaml");
  p.Poll();
  p.fake().Lose(3, true);
  std::vector<GpuVerdict> v = p.Poll();
  EXPECT_TRUE(v[3].lost);
  EXPECT_TRUE(v[3].results.empty());
  EXPECT_FALSE(v[2].lost);
}

TEST(HealthChecksTest, MigParentsAreJudgedOnceNotPerMigDevice) {
  Polled p("2-gpu-mig.yaml");
  std::vector<GpuVerdict> v = p.Poll();
  ASSERT_EQ(v.size(), 2u);  // one verdict a physical GPU, MIG or not
  EXPECT_EQ(v[0].results.size(), kCheckCount);
}

TEST(HealthChecksTest, AtMostTenNvmlCallsPerGpuPerPoll) {
  for (const char* fixture : {"8-gpu-nvlink.yaml", "8-gpu-pcie.yaml", "2-gpu-mig.yaml"}) {
    Polled p(fixture);
    p.Poll();
    const uint64_t first = p.poller().poll_calls();
    p.Poll();
    const uint64_t per_poll = p.poller().poll_calls() - first;
    EXPECT_LE(per_poll, 10 * p.gpus()) << fixture;
    EXPECT_GT(per_poll, 0u);
  }
}

}  // namespace
}  // namespace gpu_agent::health
