// What a ResourceClaim's allocation asks of this driver on this node: its
// results for this driver's pool, and the opaque GpuConfig that applies to
// each, read from the claim as the API server returns it (any served version
// of resource.k8s.io).
#ifndef GPU_AGENT_DRA_CLAIM_ALLOCATION_H_
#define GPU_AGENT_DRA_CLAIM_ALLOCATION_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dra/claim_handler.h"

namespace gpu_agent::dra {

// The time slice a GPU has until someone sets another.
inline constexpr char kDefaultTimeSlice[] = "Default";

// A GpuConfig's time-slicing interval as the level nvidia-smi compute-policy
// --set-timeslice takes: Default 0, Short 1, Medium 2, Long 3; -1 for
// another name.
int TimeSliceLevel(std::string_view interval);

struct AllocatedDevice {
  std::string request;
  std::string device;
  // The compute time slice a GpuConfig asks for this request's device
  // ("Default", "Short", "Medium", "Long"), or "": none asked.
  std::string time_slice;
};

// The claim's results this driver prepares, parsed from the claim's JSON:
// errors name the claim and what is wrong (no allocation, a UID other than
// `claim.uid`, no result for this driver in `pool`, opaque parameters for
// this driver that are not a GpuConfig it accepts).
absl::StatusOr<std::vector<AllocatedDevice>> ParseAllocation(const std::string& claim_json,
                                                             const ClaimRef& claim,
                                                             const std::string& driver,
                                                             const std::string& pool);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_CLAIM_ALLOCATION_H_
