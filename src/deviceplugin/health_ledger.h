// The health a ledger of the watcher's reports (health/health_ledger.h)
// makes of advertised devices, and how many are healthy.
#ifndef GPU_AGENT_DEVICEPLUGIN_HEALTH_LEDGER_H_
#define GPU_AGENT_DEVICEPLUGIN_HEALTH_LEDGER_H_

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "deviceplugin/device.h"
#include "health/health_ledger.h"

namespace gpu_agent::deviceplugin {

// Sets each device's `healthy` to what `ledger` says of it, and false for
// a device on a GPU (by UUID) in `withheld` (held by DRA claims while the
// node moves from DRA to the device plugin). True when any device changed.
bool ApplyHealth(const health::HealthLedger& ledger, std::vector<PluginDevice>* devices,
                 const std::set<std::string>& withheld = {});

// The devices marked healthy: what the kubelet counts, and what static mode
// and `capacity set --discover` write into a Node's capacity.
size_t CountHealthy(const std::vector<PluginDevice>& devices);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_HEALTH_LEDGER_H_
