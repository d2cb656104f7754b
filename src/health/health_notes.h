// Carries the health watcher's reports to the Node (events and the
// GpuHealthy condition, health/node_health_reporter.h) when
// health.nodeEvents asks for it: an XID or lost-GPU outage as the check
// "xid" (a MIG-scoped one as "xid (GPU instance G, compute instance C)"),
// a polled check's level change under its own name. An outage a polled
// check caused is told once, by the check.
#ifndef GPU_AGENT_HEALTH_HEALTH_NOTES_H_
#define GPU_AGENT_HEALTH_HEALTH_NOTES_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "base/device_key.h"
#include "health/health_watcher.h"
#include "health/node_health_reporter.h"
#include "nvml/inventory.h"

namespace gpu_agent::health {

// Thread-safe: reports come on the health thread, SetGpus from the main one.
class HealthNotes {
 public:
  // Notes go to `reporter`; null: events and the condition are off, and
  // nothing is reported.
  explicit HealthNotes(std::unique_ptr<NodeHealthReporter> reporter)
      : reporter_(std::move(reporter)) {}
  ~HealthNotes();

  // The GPUs of the running generation, for indexes in messages.
  void SetGpus(const nvml::Inventory& inventory);

  void OnChange(const HealthChange& change);
  void OnCheck(const CheckChange& change);

  void Stop();
  bool on() const { return reporter_ != nullptr; }
  NodeHealthReporterStats stats() const;

 private:
  int IndexOf(const std::string& uuid) const;  // REQUIRES: mu_ held

  const std::unique_ptr<NodeHealthReporter> reporter_;  // null: off
  mutable std::mutex mu_;
  std::map<std::string, int> index_;  // protected by mu_
  std::set<DeviceKey> xid_out_;       // protected by mu_: told out as "xid"
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_NOTES_H_
