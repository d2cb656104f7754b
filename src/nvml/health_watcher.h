// Watches GPU health through NVML XID events on one thread, applies the XID
// policy, and brings a GPU back after a quiet period once NVML answers for it
// again. Reports plain (uuid[, MIG instance], healthy) changes; knows nothing
// of the kubelet. An XID NVML scopes to a MIG instance marks only that
// instance; any other marks the whole GPU.
#ifndef GPU_AGENT_NVML_HEALTH_WATCHER_H_
#define GPU_AGENT_NVML_HEALTH_WATCHER_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace gpu_agent::nvml {

class NvmlLibrary;

struct HealthPolicy {
  bool disabled = false;
  std::set<int> ignored_xids = {13, 31, 43, 45, 68, 109};
  std::set<int> critical_xids;  // always critical, even if ignored
  // 0: an unhealthy GPU stays out until restart.
  std::chrono::milliseconds recovery_period{60000};
  // Longest single wait for an event; bounds how long Stop() may take to
  // release NVML, and is the thread's only periodic wake-up.
  std::chrono::milliseconds wait_timeout{5000};

  // Whether `xid` marks a GPU unhealthy under this policy.
  bool IsCritical(int xid) const {
    return critical_xids.count(xid) > 0 || ignored_xids.count(xid) == 0;
  }
};

struct HealthChange {
  std::string uuid;  // the physical GPU
  // Set when the change is about one MIG instance only (an instance-scoped
  // XID); -1: the whole GPU, MIG devices included.
  int gpu_instance = -1;
  int compute_instance = -1;
  bool healthy = false;
  std::string reason;  // "XID 79", "recovered", ...
  int xid = -1;        // the XID that caused it, or -1
};

class HealthWatcher {
 public:
  using Callback = std::function<void(const HealthChange&)>;

  // Starts the thread. `initially_unhealthy` GPUs start out and are probed
  // for recovery like any other. `callback` runs on the watcher's thread and
  // is never called after Stop() returns. It is called without the
  // watcher's lock held, so it may take locks of its own and call
  // XidCounts(); it must not call Stop().
  static std::unique_ptr<HealthWatcher> Start(std::shared_ptr<const NvmlLibrary> lib,
                                              std::vector<std::string> uuids,
                                              std::set<std::string> initially_unhealthy,
                                              HealthPolicy policy, Callback callback);
  ~HealthWatcher();  // Stop()

  // Stops reporting at once. The thread ends when its current NVML wait
  // returns (at most wait_timeout); Stop() waits briefly for that and
  // otherwise lets the thread finish on its own (it owns what it uses).
  void Stop();

  // Every XID seen, by code (ignored ones too).
  std::map<int, uint64_t> XidCounts() const;

  struct State;

 private:
  explicit HealthWatcher(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_HEALTH_WATCHER_H_
