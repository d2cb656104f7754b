#include "health/health_ledger.h"

#include <gtest/gtest.h>

#include "base/device_key.h"

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

}  // namespace
}  // namespace gpu_agent::health
