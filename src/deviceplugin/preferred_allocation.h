// GetPreferredAllocation: which of the available devices a container should
// get. Whole GPUs: the best-connected set (NVLink, then PCIe distance) from
// the topology cached at discovery. Replicas: spread over the least-used
// GPUs. Pure computation, no NVML and no locks.
#ifndef GPU_AGENT_DEVICEPLUGIN_PREFERRED_ALLOCATION_H_
#define GPU_AGENT_DEVICEPLUGIN_PREFERRED_ALLOCATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deviceplugin/device_publisher.h"

namespace gpu_agent::deviceplugin {

// Returns exactly `size` IDs from `available`, including every ID of
// `must_include`. kInvalidArgument when the request cannot be met (size out
// of range, IDs unknown or not available), naming the IDs.
absl::StatusOr<std::vector<std::string>> PreferredAllocation(
    const DeviceSnapshot& snap, const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size);

// The set of `size` physical GPUs among `candidates` (a superset of `fixed`)
// with the highest sum of pairwise `score`. Exact search while the number of
// combinations is small, greedy with swap refinement beyond.
std::vector<int> BestConnectedSet(const std::vector<std::vector<int>>& score,
                                  const std::vector<int>& candidates, const std::vector<int>& fixed,
                                  size_t size);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_PREFERRED_ALLOCATION_H_
