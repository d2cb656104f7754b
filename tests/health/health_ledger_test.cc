#include "health/health_ledger.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/device_key.h"
#include "health/health_check_catalog.h"
#include "health/health_watcher.h"

namespace gpu_agent::health {
namespace {

TEST(HealthLedgerTest, SetSaysWhetherTheOutagesChanged) {
  HealthLedger ledger;
  EXPECT_FALSE(ledger.Set(DeviceKey::Gpu("GPU-0"), true));  // was never out
  EXPECT_TRUE(ledger.Set(DeviceKey::Gpu("GPU-0"), false));
  EXPECT_FALSE(ledger.Set(DeviceKey::Gpu("GPU-0"), false));  // out already
  EXPECT_TRUE(ledger.Set({"GPU-0", 1, 0}, false));           // an instance is a key of its own
  EXPECT_TRUE(ledger.Set(DeviceKey::Gpu("GPU-0"), true));
  EXPECT_FALSE(ledger.Set(DeviceKey::Gpu("GPU-0"), true));
}

TEST(HealthLedgerTest, AKeyOutCoversItsGpusInstancesAndNoOtherGpu) {
  HealthLedger ledger;
  EXPECT_TRUE(ledger.Healthy(DeviceKey::Gpu("GPU-0")));
  ledger.Set({"GPU-0", 1, 0}, false);  // an instance-scoped XID
  EXPECT_FALSE(ledger.Healthy({"GPU-0", 1, 0}));
  EXPECT_TRUE(ledger.Healthy({"GPU-0", 2, 0}));
  EXPECT_TRUE(ledger.Healthy(DeviceKey::Gpu("GPU-0")));
  ledger.Set(DeviceKey::Gpu("GPU-0"), false);
  EXPECT_FALSE(ledger.Healthy({"GPU-0", 2, 0}));
  EXPECT_TRUE(ledger.Healthy(DeviceKey::Gpu("GPU-1")));
  ledger.Set(DeviceKey::Gpu("GPU-0"), true);  // the instance stays out
  EXPECT_FALSE(ledger.Healthy({"GPU-0", 1, 0}));
  EXPECT_TRUE(ledger.Healthy({"GPU-0", 2, 0}));
}

HealthChange Out(DeviceKey key, std::string reason, int xid = -1, std::string check = "") {
  HealthChange c;
  c.key = std::move(key);
  c.healthy = false;
  c.reason = std::move(reason);
  c.xid = xid;
  c.check = std::move(check);
  return c;
}

HealthChange Back(DeviceKey key) {
  HealthChange c;
  c.key = std::move(key);
  c.healthy = true;
  c.reason = "recovered";
  return c;
}

// The reason of the outage that covers `device`, or "healthy".
std::string ReasonFor(const HealthLedger& ledger, const DeviceKey& device) {
  const HealthLedger::Outage* o = ledger.Covering(device);
  return o == nullptr ? "healthy" : o->reason;
}

TEST(HealthLedgerTest, AGpuWideOutageCoversItsMigDevicesWithItsReasonAndCause) {
  HealthLedger ledger;
  EXPECT_TRUE(ledger.Set(Out(DeviceKey::Gpu("GPU-0"), "XID 79", 79)));
  for (const DeviceKey& mig : {DeviceKey{"GPU-0", 1, 0}, DeviceKey{"GPU-0", 2, 0}}) {
    const HealthLedger::Outage* o = ledger.Covering(mig);
    ASSERT_NE(o, nullptr) << mig.ToString();
    EXPECT_EQ(*o, (HealthLedger::Outage{DeviceKey::Gpu("GPU-0"), "XID 79", "lost"}));
  }
  EXPECT_EQ(ledger.Covering(DeviceKey::Gpu("GPU-1")), nullptr);
  EXPECT_FALSE(ledger.Set(Out(DeviceKey::Gpu("GPU-0"), "XID 79", 79)));  // the same again
}

TEST(HealthLedgerTest, AMigOnlyOutageDoesNotCoverItsSibling) {
  HealthLedger ledger;
  ledger.Set(Out({"GPU-0", 1, 0}, "XID 94", 94));
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 1, 0}), "XID 94");
  EXPECT_EQ(ledger.Covering({"GPU-0", 1, 0})->cause, "xid");
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 2, 0}), "healthy");
  EXPECT_EQ(ReasonFor(ledger, DeviceKey::Gpu("GPU-0")), "healthy");
}

TEST(HealthLedgerTest, TheGpusRecoveryLeavesTheInstancesOwnOutage) {
  HealthLedger ledger;
  ledger.Set(Out({"GPU-0", 1, 0}, "XID 94", 94));
  ledger.Set(Out(DeviceKey::Gpu("GPU-0"), "row remap failed", -1, "rowRemapFailed"));
  // The first out that covers it speaks for it.
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 1, 0}), "XID 94");
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 2, 0}), "row remap failed");
  EXPECT_EQ(ledger.Covering({"GPU-0", 2, 0})->cause, "rowRemapFailed");
  EXPECT_TRUE(ledger.Set(Back(DeviceKey::Gpu("GPU-0"))));
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 1, 0}), "XID 94");
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 2, 0}), "healthy");
  EXPECT_FALSE(ledger.Set(Back(DeviceKey::Gpu("GPU-0"))));  // back already
  EXPECT_TRUE(ledger.Set(Back({"GPU-0", 1, 0})));
  EXPECT_TRUE(ledger.outages().empty());
}

TEST(HealthLedgerTest, AKeyOutAgainTakesTheNewReasonAndCountsAsTheLatest) {
  HealthLedger ledger;
  ledger.Set(Out(DeviceKey::Gpu("GPU-0"), "XID 48", 48));
  ledger.Set(Out({"GPU-0", 1, 0}, "XID 94", 94));
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 1, 0}), "XID 48");
  EXPECT_TRUE(ledger.Set(Out(DeviceKey::Gpu("GPU-0"), "XID 79", 79)));
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 1, 0}), "XID 94");
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 2, 0}), "XID 79");
  // The plain form keeps what a key is out with.
  EXPECT_FALSE(ledger.Set(DeviceKey::Gpu("GPU-0"), false));
  EXPECT_EQ(ReasonFor(ledger, {"GPU-0", 2, 0}), "XID 79");
}

TEST(HealthLedgerTest, OutagesAtAGenerationsStartReplaceThoseBeforeKeepingTheFirstOfAKey) {
  HealthLedger ledger;
  ledger.Set(Out(DeviceKey::Gpu("GPU-9"), "XID 48", 48));
  Outage carried;
  carried.key = DeviceKey::Gpu("GPU-0");
  carried.reason = "XID 79";
  carried.xid = 79;
  ledger.SetOutages(
      {{DeviceKey::Gpu("GPU-0"), "unhealthy at start", "xid"}, HealthLedger::OutageOf(carried)});
  EXPECT_EQ(
      ledger.outages(),
      (std::vector<HealthLedger::Outage>{{DeviceKey::Gpu("GPU-0"), "unhealthy at start", "xid"}}));
  EXPECT_TRUE(ledger.Healthy(DeviceKey::Gpu("GPU-9")));
  EXPECT_EQ(HealthLedger::OutageOf(carried).cause, "lost");
}

CheckChange Check(std::string uuid, CheckId id, Severity level, std::string value) {
  CheckChange c;
  c.now.uuid = std::move(uuid);
  c.now.check = id;
  c.now.level = level;
  c.now.value = std::move(value);
  return c;
}

TEST(HealthLedgerTest, DegradedChecksAreKeptPerGpuInTheCatalogsOrder) {
  HealthLedger ledger;
  EXPECT_TRUE(ledger.DegradedChecks("GPU-0").empty());
  EXPECT_TRUE(ledger.SetCheck(Check("GPU-0", CheckId::kPcieWidth, Severity::kDegraded, "x8")));
  EXPECT_TRUE(ledger.SetCheck(Check("GPU-0", CheckId::kTemperature, Severity::kDegraded, "91 C")));
  EXPECT_TRUE(ledger.SetCheck(Check("GPU-1", CheckId::kNvLink, Severity::kDegraded, "link 3")));
  EXPECT_FALSE(ledger.SetCheck(Check("GPU-0", CheckId::kPcieWidth, Severity::kDegraded, "x8")));
  EXPECT_TRUE(ledger.SetCheck(Check("GPU-0", CheckId::kPcieWidth, Severity::kDegraded, "x4")));
  EXPECT_EQ(ledger.DegradedChecks("GPU-0"),
            (HealthLedger::Degraded{{CheckId::kTemperature, "91 C"}, {CheckId::kPcieWidth, "x4"}}));
  // Degraded checks take nothing out.
  EXPECT_TRUE(ledger.Healthy({"GPU-0", 1, 0}));
  // Unhealthy or ok: no longer degraded.
  EXPECT_TRUE(ledger.SetCheck(Check("GPU-0", CheckId::kTemperature, Severity::kUnhealthy, "99 C")));
  EXPECT_TRUE(ledger.SetCheck(Check("GPU-0", CheckId::kPcieWidth, Severity::kOk, "x16")));
  EXPECT_FALSE(ledger.SetCheck(Check("GPU-0", CheckId::kPcieWidth, Severity::kOk, "x16")));
  EXPECT_TRUE(ledger.DegradedChecks("GPU-0").empty());
  EXPECT_EQ(ledger.DegradedChecks("GPU-1").size(), 1u);
  // A generation's start keeps them.
  ledger.SetOutages({});
  EXPECT_EQ(ledger.DegradedChecks("GPU-1").size(), 1u);
}

}  // namespace
}  // namespace gpu_agent::health
