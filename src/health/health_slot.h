// The health watcher a mode runs, replaced at each reload. The XID counts of
// the watchers it replaced are kept, so gpu_agent_xid_events_total only
// grows over reloads, in every mode.
#ifndef GPU_AGENT_HEALTH_HEALTH_SLOT_H_
#define GPU_AGENT_HEALTH_HEALTH_SLOT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "health/health_watcher.h"

namespace gpu_agent::health {

// Thread-safe: the main thread replaces the watcher while scrapes and
// probes read it.
class HealthSlot {
 public:
  ~HealthSlot() { Stop(); }

  // Stops the running watcher, which stays readable (its XIDs, Alive) until
  // Replace, and returns what it has out: what the next one carries, so no
  // outage goes missing over a reload.
  std::vector<HealthWatcher::Outage> StopForReplacement();
  // Puts `next` (null: none, NVML being absent) in place of the running one,
  // whose XID counts are kept.
  void Replace(std::unique_ptr<HealthWatcher> next);
  // Stops the running watcher, if any. Stopping waits for what its thread is
  // doing between two NVML event waits (not for a wait: health_watcher.h);
  // the readers below are not held up by it.
  void Stop();

  // SIGUSR1: an operator vouches that GPUs held for a reset were reset.
  void OperatorVouches();
  // True with no watcher; else the watcher's own answer (/healthz).
  bool Alive(std::string* why) const;
  // XIDs seen by every watcher this slot held, by code.
  std::map<int, uint64_t> XidCounts() const;
  // The running watcher's check standings and outages (none without one).
  std::vector<CheckStatus> Checks() const;
  std::vector<HealthWatcher::Outage> Outages() const;
  // Polls of every watcher this slot held, and the NVML calls they made.
  uint64_t Polls() const;
  uint64_t PollCalls() const;

 private:
  // Stops the running watcher outside mu_ and returns it (null: none).
  // REQUIRES: replace_mu_ held.
  HealthWatcher* StopRunning();

  std::mutex replace_mu_;  // taken by StopForReplacement, Replace and Stop, before mu_
  mutable std::mutex mu_;
  std::unique_ptr<HealthWatcher> watcher_;                 // protected by mu_
  std::map<int, uint64_t> replaced_xids_;                  // protected by mu_
  uint64_t replaced_polls_ = 0, replaced_poll_calls_ = 0;  // protected by mu_
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_SLOT_H_
