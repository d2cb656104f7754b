// dra.taints: the taint effect DRA mode gives a device for each cause of its
// trouble, and the defaults: a GPU off the bus (lost) or whose driver asks
// for a reset or a reboot (the recoveryAction check) NoExecute, as its jobs
// cannot go on; any other unhealthy cause (an XID, a check at severity
// unhealthy) NoSchedule; a degraded check None (informational, where the
// API server serves that effect: 1.36 and later); a check at severity
// ignore, off (no taint).
#ifndef GPU_AGENT_AGENT_CONFIG_DRA_TAINTS_H_
#define GPU_AGENT_AGENT_CONFIG_DRA_TAINTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"

namespace gpu_agent {

// "lost", "xid", then every health check's name.
std::vector<std::string> DraTaintCauses();

// The effect for `cause`: "None", "NoSchedule", "NoExecute" or "off" (the
// device is published with no taint, and leaves the slices if unhealthy).
std::string DraTaintEffect(const Config& config, std::string_view cause);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_DRA_TAINTS_H_
