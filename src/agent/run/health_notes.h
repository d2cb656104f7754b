// Carries the health watcher's reports to the Node (events and the
// GpuHealthy condition, apiserver/node_health_reporter.h) when
// health.nodeEvents asks for it: an XID or lost-GPU outage as the check
// "xid" (a MIG-scoped one as "xid (GPU instance G, compute instance C)"),
// a polled check's level change under its own name. An outage a polled
// check caused is told once, by the check.
#ifndef GPU_AGENT_AGENT_RUN_HEALTH_NOTES_H_
#define GPU_AGENT_AGENT_RUN_HEALTH_NOTES_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/config/config.h"
#include "apiserver/node_health_reporter.h"
#include "base/device_key.h"
#include "health/health_watcher.h"
#include "nvml/inventory.h"

namespace gpu_agent {

// Thread-safe: reports come on the health thread, SetGpus from the main one.
class HealthNotes {
 public:
  // Starts the reporter when health.nodeEvents (and the mode, for auto)
  // calls for it; otherwise, or when no API connection can be made, logs
  // that events and the condition are off and reports nothing.
  static std::shared_ptr<HealthNotes> Start(const Config& config, bool static_mode);
  ~HealthNotes();

  // The GPUs of the running generation, for indexes in messages.
  void SetGpus(const nvml::Inventory& inventory);

  void OnChange(const health::HealthChange& change);
  void OnCheck(const health::CheckChange& change);

  void Stop();
  bool on() const { return reporter_ != nullptr; }
  apiserver::NodeHealthReporterStats stats() const;

 private:
  explicit HealthNotes(std::unique_ptr<apiserver::NodeHealthReporter> r)
      : reporter_(std::move(r)) {}
  int IndexOf(const std::string& uuid) const;  // REQUIRES: mu_ held

  const std::unique_ptr<apiserver::NodeHealthReporter> reporter_;  // null: off
  mutable std::mutex mu_;
  std::map<std::string, int> index_;  // protected by mu_
  std::set<DeviceKey> xid_out_;       // protected by mu_: told out as "xid"
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_HEALTH_NOTES_H_
