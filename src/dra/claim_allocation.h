// What a ResourceClaim's allocation asks of this driver on this node: its
// results for this driver's pool, and the opaque GpuConfig that applies to
// each, read from the claim as the API server returns it (any served version
// of resource.k8s.io).
#ifndef GPU_AGENT_DRA_CLAIM_ALLOCATION_H_
#define GPU_AGENT_DRA_CLAIM_ALLOCATION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dra/claim_handler.h"
#include "dra/device_taint.h"

namespace gpu_agent::dra {

// The time slice a GPU has until someone sets another.
inline constexpr char kDefaultTimeSlice[] = "Default";

// A GpuConfig's time-slicing interval as the level nvidia-smi compute-policy
// --set-timeslice takes: Default 0, Short 1, Medium 2, Long 3; -1 for
// another name.
int TimeSliceLevel(std::string_view interval);

// The claim's request a result of `request` serves: `request` itself, or
// for a subrequest of a prioritized list ("<request>/<subrequest>",
// firstAvailable) the request before the '/'. The kubelet matches a
// container's resources.claims[].request, always a main request, against
// the request names of a prepared device exactly.
std::string MainRequestName(const std::string& request);

struct AllocatedDevice {
  // As the result names it: "<request>" or "<request>/<subrequest>".
  std::string request;
  std::string device;
  // The result's adminAccess: a diagnostic claim, given the device whatever
  // its taints and alongside the claims it is prepared for.
  bool admin_access = false;
  // The taints the scheduler found this claim tolerates.
  std::vector<DeviceToleration> tolerations;
  // The result's shareID: the device is one claims share (consumable
  // capacity) and this is this claim's share of it; "" when given whole.
  std::string share_id;
  // The shares of the device it consumes (consumedCapacity "shares"; 1
  // when the result names none). Only for a share.
  int64_t shares = 1;
  // The compute time slice a GpuConfig asks for this request's device
  // ("Default", "Short", "Medium", "Long"), or "": none asked.
  std::string time_slice;
};

// The claim's results this driver prepares, parsed from the claim's JSON:
// errors name the claim and what is wrong (no allocation, a UID other than
// `claim.uid`, no result for this driver in `pool`, a result or a config
// for this driver naming a request or subrequest the claim's
// spec.devices.requests do not have, opaque parameters for this driver
// that are not a GpuConfig it accepts, a shareID that is no UID, consumed
// shares that are not a whole number from 1 to kMaxShares). A GpuConfig
// applies to the requests it names (none: all), and one naming a request to
// all its subrequests.
absl::StatusOr<std::vector<AllocatedDevice>> ParseAllocation(const std::string& claim_json,
                                                             const ClaimRef& claim,
                                                             const std::string& driver,
                                                             const std::string& pool);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_CLAIM_ALLOCATION_H_
