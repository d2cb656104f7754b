// What the health watcher has reported out, and the health that makes of
// advertised devices. The watcher (health/health_watcher.h) is the one source
// of device health; a ledger only records its reports, so every reader of
// health (each resource's publisher, static mode's count) holds one and feeds
// it the same reports.
#ifndef GPU_AGENT_DEVICEPLUGIN_HEALTH_LEDGER_H_
#define GPU_AGENT_DEVICEPLUGIN_HEALTH_LEDGER_H_

#include <cstddef>
#include <set>
#include <vector>

#include "base/device_key.h"
#include "deviceplugin/device.h"

namespace gpu_agent::deviceplugin {

// The keys that are out. A device is healthy when none covers it, so a
// GPU-wide recovery leaves an instance that is still out alone, and the
// other way round.
//
// Thread-compatible.
class HealthLedger {
 public:
  // Records a report that `key` went out (`healthy` false) or came back.
  // True when the set of keys out changed.
  bool Set(const DeviceKey& key, bool healthy) {
    return healthy ? out_.erase(key) > 0 : out_.insert(key).second;
  }

  bool Healthy(const PluginDevice& device) const;

  // Sets each device's `healthy` to what the ledger says of it. True when
  // any device changed.
  bool Apply(std::vector<PluginDevice>* devices) const;

 private:
  std::set<DeviceKey> out_;
};

// The devices marked healthy: what the kubelet counts, and what static mode
// and `capacity set --discover` write into a Node's capacity.
size_t CountHealthy(const std::vector<PluginDevice>& devices);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_HEALTH_LEDGER_H_
