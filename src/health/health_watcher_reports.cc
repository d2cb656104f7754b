// Marking GPUs out, and the reports the watcher's callers get of it.
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "health/health_watcher_state.h"

namespace gpu_agent::health {

// The callbacks are called without holding `mu`: they take their own locks
// (the device publisher's, the reconciler's) and may read XidCounts().
// Stop() turns reporting off and waits for the calls in flight, so a call
// under way ends before Stop() returns and none starts after.
template <typename Change, typename Fn>
void HealthWatcher::State::Deliver(const Fn& fn, const Change& change) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!reporting) return;
    ++reports_in_flight;
  }
  fn(change);
  std::lock_guard<std::mutex> lock(mu);
  --reports_in_flight;
  cv.notify_all();
}

void HealthWatcher::State::Report(const HealthChange& change) { Deliver(callback, change); }

void HealthWatcher::State::ReportCheck(const CheckChange& change) {
  if (on_check) Deliver(on_check, change);
}

void HealthWatcher::State::MarkBad(const DeviceKey& key, const std::string& reason, int xid,
                                   bool needs_reset, bool was_lost, const std::string& check) {
  const bool was_healthy = book.Mark(key, reason, xid, needs_reset, was_lost, check);
  MirrorOutages();
  if (was_healthy) {
    LogWarning(key.IsWholeGpu() ? "GPU marked unhealthy" : "MIG instance marked unhealthy",
               {{"uuid", key.uuid},
                {"target", key.ToString()},
                {"reason", reason},
                {"returns", book.entries().at(key).needs_reset
                                ? "once NVML shows a reset, or on SIGUSR1"
                                : "after the quiet period, once NVML answers"}});
    Report({key, false, reason, xid, was_lost, check});
  }
}

void HealthWatcher::State::MirrorOutages() {
  std::vector<Outage> copy = book.Snapshot();
  std::lock_guard<std::mutex> lock(mu);
  outages = std::move(copy);
}

}  // namespace gpu_agent::health
