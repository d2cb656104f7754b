// How well two advertised units are connected, as the integer scores
// GetPreferredAllocation compares: computed once from the topology NVML gave
// at discovery, so no RPC asks NVML.
#ifndef GPU_AGENT_AGENT_PLAN_LINK_SCORE_H_
#define GPU_AGENT_AGENT_PLAN_LINK_SCORE_H_

#include <cstddef>
#include <vector>

#include "nvml/inventory.h"

namespace gpu_agent {

// Higher is better: NVLinks dominate, then PCIe distance; 0 when unknown.
int LinkScore(const nvml::GpuLink& link);

// The square score matrix for units on the GPUs at `gpu_positions` (indexes
// into `inventory.gpus`, one per unit, repeated for MIG devices of one GPU).
// Two units on one GPU score above any link; the diagonal is 0.
std::vector<std::vector<int>> LinkScoreMatrix(const nvml::Inventory& inventory,
                                              const std::vector<size_t>& gpu_positions);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_LINK_SCORE_H_
