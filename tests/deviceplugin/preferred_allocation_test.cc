#include "deviceplugin/preferred_allocation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/plugin_devices.h"

namespace gpu_agent::deviceplugin {
namespace {

std::vector<std::vector<int>> CubeMesh() { return gpu_agent::testing::CubeMeshScores(); }

ResourceSpec Spec(const std::vector<std::vector<int>>& score, int replicas = 1) {
  ResourceSpec spec;
  spec.resource_name = "nvidia.com/gpu";
  spec.replicated = replicas > 1;
  for (size_t g = 0; g < score.size(); ++g) {
    for (int r = 0; r < replicas; ++r) {
      PluginDevice d;
      d.key.uuid = "GPU-" + std::to_string(g);
      d.gpu_id = d.key.uuid;
      d.id = replicas > 1 ? d.gpu_id + "::" + std::to_string(r) : d.gpu_id;
      d.physical = static_cast<int>(g);
      spec.devices.push_back(d);
    }
  }
  spec.link_score = score;
  return spec;
}

std::vector<std::string> AllIds(const DeviceSnapshot& s) {
  std::vector<std::string> ids;
  for (auto& d : s.devices) ids.push_back(d.id);
  return ids;
}

std::set<std::string> AsSet(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

TEST(PreferredAllocationTest, PicksTheBestNvlinkSet) {
  DevicePublisher pub(Spec(CubeMesh()));
  auto snap = pub.Current();
  auto two = PreferredAllocation(*snap, AllIds(*snap), {"GPU-0"}, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<std::string>{"GPU-0", "GPU-3"}));  // NV2, lowest index
  auto four = PreferredAllocation(*snap, AllIds(*snap), {}, 4);
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(AsSet(*four), (std::set<std::string>{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}));
  // With 0-3 taken, the best pair left is a double link: 1-2, 4-7, 5-6 or 6-7.
  auto pair =
      PreferredAllocation(*snap, {"GPU-1", "GPU-2", "GPU-4", "GPU-5", "GPU-6", "GPU-7"}, {}, 2);
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(*pair, (std::vector<std::string>{"GPU-1", "GPU-2"}));
}

TEST(PreferredAllocationTest, PcieSwitchPairsBeforeCrossSocket) {
  // 8 GPUs: pairs on a switch (50), same socket (30), across sockets (10).
  std::vector<std::vector<int>> s(8, std::vector<int>(8));
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      s[i][j] = i == j ? 0 : (i / 2 == j / 2 ? 50 : (i / 4 == j / 4 ? 30 : 10));
    }
  }
  DevicePublisher pub(Spec(s));
  auto snap = pub.Current();
  auto r = PreferredAllocation(*snap, {"GPU-0", "GPU-2", "GPU-5", "GPU-4", "GPU-7"}, {"GPU-7"}, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(AsSet(*r), (std::set<std::string>{"GPU-7", "GPU-4", "GPU-5"}));
  EXPECT_EQ((*r)[0], "GPU-7");  // must-include first
}

TEST(PreferredAllocationTest, ReplicasSpreadOverLeastUsedGpus) {
  DevicePublisher pub(Spec({{0, 1, 1}, {1, 0, 1}, {1, 1, 0}}, 4));
  auto snap = pub.Current();
  // GPU-0 has two replicas in use, GPU-1 one, GPU-2 none.
  std::vector<std::string> avail = {"GPU-0::2", "GPU-0::3", "GPU-1::1", "GPU-1::2", "GPU-1::3",
                                    "GPU-2::0", "GPU-2::1", "GPU-2::2", "GPU-2::3"};
  auto r = PreferredAllocation(*snap, avail, {}, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<std::string>{"GPU-2::0", "GPU-1::1", "GPU-2::1"}));
}

TEST(PreferredAllocationTest, BadRequests) {
  DevicePublisher pub(Spec(CubeMesh()));
  auto snap = pub.Current();
  struct Case {
    std::vector<std::string> avail, must;
    int size;
    std::string expect;
  } cases[] = {
      {{"GPU-0", "GPU-1"}, {}, 3, "allocation_size 3 is more than the 2 available"},
      {{"GPU-0", "GPU-1"}, {"GPU-5"}, 1, "must-include device IDs \"GPU-5\" are not among"},
      {{"GPU-0", "nope"}, {}, 1, "unknown available device IDs \"nope\""},
      {{"GPU-0", "GPU-1"}, {}, 0, "must be at least 1"},
      {{"GPU-0", "GPU-1"}, {"GPU-0", "GPU-1"}, 1, "more than allocation_size 1"},
  };
  for (const Case& c : cases) {
    auto r = PreferredAllocation(*snap, c.avail, c.must, c.size);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(std::string(r.status().message()).find(c.expect), std::string::npos)
        << r.status().message();
  }
}

TEST(PreferredAllocationTest, LargeNodesUseTheGreedySearchAndStayCorrectInSize) {
  // 32 GPUs in 4 NVLink islands of 8: a set of 8 should be one island.
  const int n = 32;
  std::vector<std::vector<int>> s(n, std::vector<int>(n));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) s[i][j] = i == j ? 0 : (i / 8 == j / 8 ? 460 : 10);
  }
  DevicePublisher pub(Spec(s));
  auto snap = pub.Current();
  std::vector<std::string> avail = AllIds(*snap);
  avail.erase(avail.begin());  // GPU-0 in use
  auto r = PreferredAllocation(*snap, avail, {"GPU-9"}, 8);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 8u);
  for (const std::string& id : *r) {
    const int g = std::stoi(id.substr(4));
    EXPECT_EQ(g / 8, 1) << id;  // the island of GPU-9
  }
}

TEST(BestConnectedSetTest, ExactSearchFindsTheOptimum) {
  auto s = CubeMesh();
  std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  // Exhaustive check against a brute force over all 3-subsets.
  long best = -1;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b)
      for (int c = b + 1; c < 8; ++c) best = std::max<long>(best, s[a][b] + s[a][c] + s[b][c]);
  auto set = BestConnectedSet(s, all, {}, 3);
  ASSERT_EQ(set.size(), 3u);
  EXPECT_EQ(s[set[0]][set[1]] + s[set[0]][set[2]] + s[set[1]][set[2]], best);
}

}  // namespace
}  // namespace gpu_agent::deviceplugin
