#include "base/device_key.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gpu_agent {
namespace {

TEST(DeviceKeyTest, GpuNamesTheWholeGpu) {
  const DeviceKey gpu = DeviceKey::Gpu("GPU-0");
  EXPECT_EQ(gpu, (DeviceKey{"GPU-0", DeviceKey::kWhole, DeviceKey::kWhole}));
  EXPECT_TRUE(gpu.IsWholeGpu());
  EXPECT_FALSE((DeviceKey{"GPU-0", 1, 0}).IsWholeGpu());
  EXPECT_EQ((DeviceKey{"GPU-0"}), gpu);  // instances default to the whole GPU
}

TEST(DeviceKeyTest, CoversWhatAnOutageTakesOut) {
  const DeviceKey gpu0 = DeviceKey::Gpu("GPU-0");
  const DeviceKey gi1{"GPU-0", 1, DeviceKey::kWhole};
  const DeviceKey gi1ci0{"GPU-0", 1, 0};
  const DeviceKey gi1ci1{"GPU-0", 1, 1};
  const DeviceKey gi2ci0{"GPU-0", 2, 0};
  const DeviceKey gpu1 = DeviceKey::Gpu("GPU-1");
  struct Case {
    DeviceKey out;
    DeviceKey device;
    bool covered;
  } cases[] = {
      {gpu0, gpu0, true},    {gpu0, gi1ci0, true},   {gpu0, gpu1, false},
      {gi1, gi1ci0, true},   {gi1, gi1ci1, true},    {gi1, gi2ci0, false},
      {gi1, gpu0, false},    {gi1ci0, gi1ci0, true}, {gi1ci0, gi1ci1, false},
      {gi1ci0, gpu0, false}, {gpu1, gi1ci0, false},  {DeviceKey{"GPU-1", 1, 0}, gi1ci0, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.out.Covers(c.device), c.covered)
        << c.out.ToString() << " covers " << c.device.ToString();
  }
}

TEST(DeviceKeyTest, OrdersAndComparesEveryField) {
  std::set<DeviceKey> keys = {{"GPU-1"}, {"GPU-0", 2, 0}, {"GPU-0"}, {"GPU-0", 1, 0}, {"GPU-0"}};
  ASSERT_EQ(keys.size(), 4u);
  auto it = keys.begin();
  EXPECT_EQ(*it++, DeviceKey::Gpu("GPU-0"));
  EXPECT_EQ(*it++, (DeviceKey{"GPU-0", 1, 0}));
  EXPECT_EQ(*it++, (DeviceKey{"GPU-0", 2, 0}));
  EXPECT_EQ(*it++, DeviceKey::Gpu("GPU-1"));
  EXPECT_NE((DeviceKey{"GPU-0", 1, 0}), (DeviceKey{"GPU-0", 1, 1}));
}

TEST(DeviceKeyTest, DescribesItselfForLogs) {
  EXPECT_EQ(DeviceKey::Gpu("GPU-0").ToString(), "GPU-0");
  EXPECT_EQ((DeviceKey{"GPU-0", 3, DeviceKey::kWhole}).ToString(), "GPU-0 GPU instance 3");
  EXPECT_EQ((DeviceKey{"GPU-0", 3, 1}).ToString(), "GPU-0 GPU instance 3 compute instance 1");
}

}  // namespace
}  // namespace gpu_agent
