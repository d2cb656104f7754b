#include "agent/plan/link_score.h"

#include <algorithm>

namespace gpu_agent {
namespace {

// Two MIG devices of one GPU: closer than any pair of GPUs.
constexpr int kSameGpuScore = 10000;

}  // namespace

int LinkScore(const nvml::GpuLink& link) {
  if (link.nvlinks > 0) return 100 * link.nvlinks + 60;
  if (link.pcie_level <= 0) return 0;
  return std::max(1, 60 - link.pcie_level);  // 10 (same switch) -> 50 ... 50 (SYS) -> 10
}

std::vector<std::vector<int>> LinkScoreMatrix(const nvml::Inventory& inventory,
                                              const std::vector<size_t>& gpu_positions) {
  const size_t n = gpu_positions.size();
  std::vector<std::vector<int>> scores(n, std::vector<int>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const size_t a = gpu_positions[i], b = gpu_positions[j];
      if (a == b) {
        scores[i][j] = kSameGpuScore;
      } else if (a < inventory.links.size() && b < inventory.links[a].size()) {
        scores[i][j] = LinkScore(inventory.links[a][b]);
      }
    }
  }
  return scores;
}

}  // namespace gpu_agent
