// What the health watcher has reported out, and the health that makes of a
// device. The watcher (health/health_watcher.h) is the one source of device
// health; a ledger only records its reports, so every reader of health
// (each resource's publisher, static mode's count) holds one and feeds it
// the same reports.
#ifndef GPU_AGENT_HEALTH_HEALTH_LEDGER_H_
#define GPU_AGENT_HEALTH_HEALTH_LEDGER_H_

#include <set>

#include "base/device_key.h"

namespace gpu_agent::health {

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

  // Whether no key out covers `device` (its GPU's, or its own).
  bool Healthy(const DeviceKey& device) const;

 private:
  std::set<DeviceKey> out_;
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_LEDGER_H_
