#include "health/outage_book.h"

#include <gtest/gtest.h>

#include <chrono>

#include "base/device_key.h"
#include "support/fake_clock.h"

namespace gpu_agent::health {
namespace {

using std::chrono::milliseconds;

class OutageBookTest : public ::testing::Test {
 protected:
  gpu_agent::testing::FakeClock clock_;
  OutageBook book_{&clock_, milliseconds(1000)};
};

TEST_F(OutageBookTest, MarkSaysWhetherTheKeyWasOut) {
  const DeviceKey gpu = DeviceKey::Gpu("GPU-0");
  const DeviceKey instance{"GPU-0", 1, 0};
  EXPECT_FALSE(book_.IsOut(gpu));
  EXPECT_TRUE(book_.Mark(gpu, "XID 31", 31, false, false));
  EXPECT_FALSE(book_.Mark(gpu, "XID 43", 43, false, false));
  EXPECT_TRUE(book_.IsOut(gpu));
  // An instance is out on its own key; the GPU's outage does not make it so.
  EXPECT_FALSE(book_.IsOut(instance));
  EXPECT_TRUE(book_.Mark(instance, "XID 94", 94, false, false));
  EXPECT_EQ(book_.entries().size(), 2u);
}

TEST_F(OutageBookTest, AMarkNeedingAResetTakesOverTheReason) {
  const DeviceKey gpu = DeviceKey::Gpu("GPU-0");
  book_.Mark(gpu, "XID 31", 31, false, false);
  book_.Mark(gpu, "XID 43", 43, false, false);  // a later plain mark keeps the first reason
  EXPECT_EQ(book_.entries().at(gpu).reason, "XID 31");
  book_.Mark(gpu, "XID 79", 79, true, true);
  book_.Mark(gpu, "XID 43", 43, false, false);  // and never clears the need for a reset
  const OutageBook::Entry& e = book_.entries().at(gpu);
  EXPECT_EQ(e.reason, "XID 79");
  EXPECT_EQ(e.xid, 79);
  EXPECT_TRUE(e.needs_reset);
  EXPECT_TRUE(e.was_lost);
}

TEST_F(OutageBookTest, SnapshotCarriesKeysAndWhy) {
  book_.Mark({"GPU-1", 2, 0}, "XID 94", 94, false, false);
  book_.Mark(DeviceKey::Gpu("GPU-0"), "lost", -1, true, true);
  const std::vector<Outage> out = book_.Snapshot();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, DeviceKey::Gpu("GPU-0"));
  EXPECT_EQ(out[0].reason, "lost");
  EXPECT_TRUE(out[0].needs_reset);
  EXPECT_TRUE(out[0].was_lost);
  EXPECT_EQ(out[1].key, (DeviceKey{"GPU-1", 2, 0}));
  EXPECT_EQ(out[1].xid, 94);
  EXPECT_FALSE(out[1].needs_reset);
}

TEST_F(OutageBookTest, NextProbeFollowsTheQuietPeriod) {
  EXPECT_EQ(book_.UntilNextProbe(milliseconds(5000)), milliseconds(5000));  // nothing out
  book_.Mark(DeviceKey::Gpu("GPU-0"), "XID 31", 31, false, false);
  EXPECT_EQ(book_.UntilNextProbe(milliseconds(5000)), milliseconds(1000));
  EXPECT_EQ(book_.UntilNextProbe(milliseconds(200)), milliseconds(200));
  clock_.Advance(milliseconds(600));
  EXPECT_EQ(book_.UntilNextProbe(milliseconds(5000)), milliseconds(400));
  book_.Mark(DeviceKey::Gpu("GPU-0"), "XID 31", 31, false, false);  // starts over
  EXPECT_EQ(book_.UntilNextProbe(milliseconds(5000)), milliseconds(1000));
  clock_.Advance(milliseconds(2000));
  EXPECT_EQ(book_.UntilNextProbe(milliseconds(5000)), milliseconds(1));  // due: at once
}

}  // namespace
}  // namespace gpu_agent::health
