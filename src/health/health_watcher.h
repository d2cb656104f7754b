// Watches GPU health through NVML XID events on one thread, applies the XID
// policy, and brings a GPU back after a quiet period once NVML answers for it
// again; after an XID that needs a GPU reset, only once NVML also shows the
// reset happened (or an operator vouches for it). Reports plain (DeviceKey, healthy)
// changes; knows nothing of the kubelet. An XID NVML scopes to a MIG instance marks only that
// instance; any other marks the whole GPU.
#ifndef GPU_AGENT_HEALTH_HEALTH_WATCHER_H_
#define GPU_AGENT_HEALTH_HEALTH_WATCHER_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/device_key.h"
#include "health/health_check_catalog.h"
#include "health/outage_book.h"

namespace gpu_agent::nvml {

class NvmlLibrary;

}  // namespace gpu_agent::nvml

namespace gpu_agent::health {

struct HealthPolicy {
  bool disabled = false;
  std::set<int> ignored_xids = {13, 31, 43, 45, 68, 109};
  std::set<int> critical_xids;  // always critical, even if ignored
  // XIDs after which NVIDIA's XID catalogue (docs.nvidia.com/deploy/
  // xid-errors, "Resolution Bucket": RESET_GPU, RESTART_BM) and its memory
  // error guide ask for a GPU reset or a reboot: uncorrectable or
  // uncontained ECC (48, 95), row remapping recorded or failed (63, 64),
  // high single-bit ECC rate (92), NVLink (74), off the bus (79), GSP
  // (119, 120), recovery action changed (154). NVML still answers after most
  // of them, so answering is no sign of health: such a GPU comes back only
  // when NVML shows it was reset (see HealthWatcher), or on an operator's word.
  std::set<int> reset_xids = {48, 63, 64, 74, 79, 92, 95, 119, 120, 154};
  // 0: an unhealthy GPU stays out until restart.
  std::chrono::milliseconds recovery_period{60000};
  // Longest single wait for an event: the thread's only periodic wake-up
  // when idle, and the liveness bound is read from it.
  std::chrono::milliseconds wait_timeout{5000};
  // Longest wait after a failing event wait (100 ms doubling up to this).
  std::chrono::milliseconds max_backoff{10000};

  // The polled checks (health_check_catalog.h): each GPU read this often,
  // each check's severity and threshold. A check failing with severity
  // unhealthy takes its GPU out as a reset-class XID does (back only on the
  // check's evidence rules, and never while it still fails); degraded ones
  // are reported as CheckChanges only.
  std::chrono::milliseconds poll_interval{30000};
  CheckSettings checks = CheckSettings::Defaults();

  // Whether `xid` marks a GPU unhealthy under this policy.
  bool IsCritical(int xid) const {
    return critical_xids.count(xid) > 0 || ignored_xids.count(xid) == 0;
  }
  bool NeedsReset(int xid) const { return reset_xids.count(xid) > 0; }
};

struct HealthChange {
  // The whole GPU, MIG devices included; one MIG instance only for an
  // instance-scoped XID.
  DeviceKey key;
  bool healthy = false;
  std::string reason;      // "XID 79", "recovered", ...
  int xid = -1;            // the XID that caused it, or -1
  bool lost = false;       // off the bus: NVML answered GPU_IS_LOST
  std::string check = "";  // the polled check that failed (its name), or ""
};

struct CheckStatus {
  std::string uuid;
  CheckId check;
  Severity level = Severity::kOk;
  std::string value;  // what was judged, in words
  double number = 0;  // CheckResult::number (NaN when none)
};

// A check's level changed (ok, degraded, unhealthy); an XID's outage is a
// HealthChange.
struct CheckChange {
  CheckStatus now;
  Severity before = Severity::kOk;
};

class HealthWatcher {
 public:
  using Callback = std::function<void(const HealthChange&)>;
  using CheckCallback = std::function<void(const CheckChange&)>;

  // What is out, carried from one watcher to the next (a SIGHUP reload), so
  // a reload never brings back a GPU that is still broken.
  using Outage = health::Outage;

  // Starts the thread. `initially_unhealthy` GPUs start out and are probed
  // for recovery like any other; `carried` outages start out as they were. `callback` runs on the
  // watcher's thread and is never called after Stop() returns. It is called without the watcher's
  // lock held, so it may take locks of its own and call XidCounts(); it must not call Stop().
  // Quiet periods and the liveness bound are read on `clock`, which must outlive the watcher (its
  // thread reads it no more once Stop() returned); its waits stay real and at most
  // policy.wait_timeout long.
  static std::unique_ptr<HealthWatcher> Start(std::shared_ptr<const nvml::NvmlLibrary> lib,
                                              std::vector<std::string> uuids,
                                              std::set<std::string> initially_unhealthy,
                                              HealthPolicy policy, Callback callback,
                                              std::vector<Outage> carried = {},
                                              const Clock* clock = Clock::Real(),
                                              CheckCallback on_check = nullptr);
  ~HealthWatcher();  // Stop()

  // Stops reporting at once: returns once no callback is under way, and
  // none starts after. The thread itself ends when its current NVML wait
  // returns (at most policy.wait_timeout; NVML's wait cannot be
  // interrupted) or its current call to NVML does; Stop() does not wait for
  // that, so a reload or a SIGTERM is not held up by a wait or by a hung
  // NVML call; it does wait for what the thread does between two waits (an
  // event, a poll: bounded), so Outages() then holds all it found. The
  // stopped thread is joined by the next Stop() or Start() that finds it
  // ended, or by JoinStopped(); it then touches only its own state (not the
  // clock, not the callbacks), which it keeps until it is joined.
  // Idempotent; thread-safe, but not from the callbacks.
  void Stop();

  // Joins the stopped watchers' threads, waiting up to `within` for those
  // still in an NVML call. Returns how many are still running (0: all
  // joined). The mode runner calls it last, before the process exits.
  static int JoinStopped(std::chrono::milliseconds within);

  // Watcher threads running now, in this process (tests: none once
  // JoinStopped returned 0).
  static int ThreadsRunning();

  // Every XID seen, by code (ignored ones too).
  std::map<int, uint64_t> XidCounts() const;

  // What is out now. Thread-safe.
  std::vector<Outage> Outages() const;

  // Every GPU's standing on every check judged at the last poll (off and
  // unknown ones left out). Thread-safe.
  std::vector<CheckStatus> Checks() const;

  // Polls made, and the NVML calls they made. Thread-safe.
  uint64_t Polls() const;
  uint64_t PollCalls() const;

  // The watcher's thread has come round its loop within 4 x wait_timeout +
  // max_backoff, 21 s by default (an NVML call that hangs stops it); true when there is no thread
  // to watch (health checks off, or no event API). `why` says otherwise.
  bool Alive(std::string* why) const;

  // An operator says the GPUs held for a reset were reset or repaired: each
  // that answers comes back at the next probe (within wait_timeout).
  void OperatorVouches();

  struct State;

 private:
  explicit HealthWatcher(std::shared_ptr<State> state);
  // Shared with the stopped threads' list until the thread is joined.
  const std::shared_ptr<State> state_;
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_WATCHER_H_
