#include "nvml/health_watcher.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "base/log.h"
#include "base/strings.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::nvml {

using Clock = std::chrono::steady_clock;

struct HealthWatcher::State {
  std::shared_ptr<const NvmlLibrary> lib;
  std::vector<std::string> uuids;
  HealthPolicy policy;
  Callback callback;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;             // protected by mu
  bool exited = false;           // protected by mu
  bool reporting = true;         // protected by mu; false once Stop() returns
  int reports_in_flight = 0;     // protected by mu: callbacks running now
  std::map<int, uint64_t> xids;  // protected by mu

  // Thread-only state.
  nvmlEventSet_t set = nullptr;
  std::map<nvmlDevice_t, std::string> uuid_by_handle;
  // What is out: a whole GPU (instance ids -1) or one MIG instance.
  using Target = std::tuple<std::string, int, int>;
  struct Bad {
    Clock::time_point since;
    Clock::time_point next_probe;
  };
  std::map<Target, Bad> unhealthy;

  static Target Whole(const std::string& uuid) { return {uuid, -1, -1}; }
  static std::string Describe(const Target& t) {
    const auto& [uuid, gi, ci] = t;
    if (gi < 0) return uuid;
    return ci < 0 ? StrCat(uuid, " GPU instance ", gi)
                  : StrCat(uuid, " GPU instance ", gi, " compute instance ", ci);
  }

  // Calls out without holding `mu`: the callback takes its own locks (the
  // device publisher's, the reconciler's) and may read XidCounts(); Stop()
  // waits for a call in flight instead.
  void Report(const HealthChange& change) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!reporting) return;
      ++reports_in_flight;
    }
    callback(change);
    std::lock_guard<std::mutex> lock(mu);
    --reports_in_flight;
    cv.notify_all();
  }
  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stop;
  }
  // Sleeps up to `d` unless asked to stop. Used only for error backoff.
  void Backoff(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, d, [this] { return stop; });
  }

  void Register(const std::string& uuid) {
    const NvmlFunctions& f = lib->fn();
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t r = f.DeviceGetHandleByUUID(uuid.c_str(), &dev);
    if (r != NVML_SUCCESS) {
      LogWarning("cannot watch GPU health", {{"uuid", uuid}, {"error", lib->ErrorText(r)}});
      MarkBad(Whole(uuid), StrCat("NVML cannot find it: ", lib->ErrorText(r)), -1);
      return;
    }
    unsigned long long supported = 0;
    if (f.DeviceGetSupportedEventTypes(dev, &supported) != NVML_SUCCESS) supported = 0;
    const unsigned long long wanted = nvmlEventTypeXidCriticalError & supported;
    if (wanted == 0) {
      LogWarning("GPU does not report XID events; its health is not watched", {{"uuid", uuid}});
      return;
    }
    r = f.DeviceRegisterEvents(dev, wanted, set);
    if (r != NVML_SUCCESS) {
      LogWarning("cannot register for XID events", {{"uuid", uuid}, {"error", lib->ErrorText(r)}});
      return;
    }
    uuid_by_handle[dev] = uuid;
  }

  void MarkBad(const Target& target, const std::string& reason, int xid) {
    const auto now = Clock::now();
    const bool was_healthy = unhealthy.find(target) == unhealthy.end();
    unhealthy[target] = Bad{now, now + policy.recovery_period};
    if (was_healthy) {
      const auto& [uuid, gi, ci] = target;
      LogWarning(gi < 0 ? "GPU marked unhealthy" : "MIG instance marked unhealthy",
                 {{"uuid", uuid}, {"target", Describe(target)}, {"reason", reason}});
      Report({uuid, gi, ci, false, reason, xid});
    }
  }

  void ProbeForLostGpus() {
    const NvmlFunctions& f = lib->fn();
    int lost = 0;
    for (const std::string& uuid : uuids) {
      if (unhealthy.count(Whole(uuid))) continue;
      nvmlDevice_t dev = nullptr;
      nvmlReturn_t r = f.DeviceGetHandleByUUID(uuid.c_str(), &dev);
      nvmlMemory_t mem{};
      if (r == NVML_SUCCESS) r = f.DeviceGetMemoryInfo(dev, &mem);
      // Only GPU_IS_LOST means lost; another error says nothing of health.
      if (r != NVML_ERROR_GPU_IS_LOST) continue;
      ++lost;
      MarkBad(Whole(uuid), "NVML: the GPU has fallen off the bus (GPU_IS_LOST)", -1);
    }
    if (lost == 0) {
      LogWarning("NVML's event wait answered GPU_IS_LOST, but every GPU still answers");
    }
  }

  // NVML answers for the GPU again: a handle and a basic query both work.
  bool Answers(const std::string& uuid) {
    const NvmlFunctions& f = lib->fn();
    nvmlDevice_t dev = nullptr;
    if (f.DeviceGetHandleByUUID(uuid.c_str(), &dev) != NVML_SUCCESS) return false;
    nvmlMemory_t mem{};
    return f.DeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS;
  }

  void ProbeRecoveries() {
    if (policy.recovery_period.count() == 0) return;
    const auto now = Clock::now();
    for (auto it = unhealthy.begin(); it != unhealthy.end();) {
      if (it->second.next_probe > now) {
        ++it;
        continue;
      }
      const auto [uuid, gi, ci] = it->first;
      if (Answers(uuid)) {
        const std::string what = Describe(it->first);
        it = unhealthy.erase(it);
        bool watched = false;
        for (const auto& [h, u] : uuid_by_handle) watched |= u == uuid;
        if (!watched) Register(uuid);
        LogInfo(gi < 0 ? "GPU healthy again" : "MIG instance healthy again",
                {{"uuid", uuid}, {"target", what}});
        Report({uuid, gi, ci, true, "recovered", -1});
      } else {
        // Still lost: look again after another quiet period.
        it->second.next_probe = now + std::min(policy.recovery_period, policy.wait_timeout);
        ++it;
      }
    }
  }

  std::chrono::milliseconds NextTimeout() const {
    auto timeout = policy.wait_timeout;
    if (policy.recovery_period.count() == 0) return timeout;
    const auto now = Clock::now();
    for (const auto& [uuid, bad] : unhealthy) {
      auto until = std::chrono::ceil<std::chrono::milliseconds>(bad.next_probe - now);
      timeout = std::min(timeout, std::max(until, std::chrono::milliseconds(1)));
    }
    return timeout;
  }

  void HandleEvent(const nvmlEventData_t& ev) {
    auto it = uuid_by_handle.find(ev.device);
    const std::string uuid = it == uuid_by_handle.end() ? "" : it->second;
    if (!(ev.eventType & nvmlEventTypeXidCriticalError)) return;
    const int xid = static_cast<int>(ev.eventData);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++xids[xid];
    }
    if (!policy.IsCritical(xid)) {
      LogInfo("XID ignored by policy (application error)", {{"uuid", uuid}, {"xid", StrCat(xid)}});
      return;
    }
    if (uuid.empty()) {
      // An event NVML could not tie to one GPU: every GPU is suspect.
      LogWarning("XID without a known GPU; marking all GPUs unhealthy", {{"xid", StrCat(xid)}});
      for (const std::string& u : uuids) MarkBad(Whole(u), StrCat("XID ", xid), xid);
      return;
    }
    // NVML scopes an XID to a MIG instance by setting its ids.
    Target target = Whole(uuid);
    if (ev.gpuInstanceId != NVML_MIG_INSTANCE_ID_NONE) {
      std::get<1>(target) = static_cast<int>(ev.gpuInstanceId);
      if (ev.computeInstanceId != NVML_MIG_INSTANCE_ID_NONE) {
        std::get<2>(target) = static_cast<int>(ev.computeInstanceId);
      }
    }
    if (auto bad = unhealthy.find(target); bad != unhealthy.end()) {
      // Already out: restart its quiet period.
      bad->second.since = Clock::now();
      bad->second.next_probe = Clock::now() + policy.recovery_period;
      return;
    }
    MarkBad(target, StrCat("XID ", xid), xid);
  }

  // Creates the event set and registers every GPU. Runs on the caller's
  // thread, so events are watched once Start() returns. False: no events.
  bool Setup(const std::set<std::string>& initially_unhealthy) {
    const NvmlFunctions& f = lib->fn();
    for (const std::string& uuid : initially_unhealthy) {
      MarkBad(Whole(uuid), "discovery failed", -1);
    }
    if (!f.EventSetCreate || !f.EventSetWait || !f.DeviceRegisterEvents ||
        !f.DeviceGetSupportedEventTypes) {
      LogWarning("this NVML has no event API; XID health checks are off");
      return false;
    }
    nvmlReturn_t r = f.EventSetCreate(&set);
    if (r != NVML_SUCCESS) {
      LogError("nvmlEventSetCreate failed; XID health checks are off",
               {{"error", lib->ErrorText(r)}});
      set = nullptr;
      return false;
    }
    for (const std::string& uuid : uuids) {
      if (!initially_unhealthy.count(uuid)) Register(uuid);
    }
    return true;
  }

  void Run() {
    const NvmlFunctions& f = lib->fn();
    nvmlReturn_t r;
    int errors = 0;
    auto backoff = std::chrono::milliseconds(100);
    while (!Stopping()) {
      nvmlEventData_t ev{};
      // "Not MIG-scoped" unless the driver says otherwise: a driver that
      // leaves them must not file a GPU-wide XID under instance 0/0.
      ev.gpuInstanceId = ev.computeInstanceId = NVML_MIG_INSTANCE_ID_NONE;
      r = f.EventSetWait(set, &ev, static_cast<unsigned>(NextTimeout().count()));
      if (Stopping()) break;
      if (r == NVML_SUCCESS) {
        errors = 0;
        backoff = std::chrono::milliseconds(100);
        HandleEvent(ev);
      } else if (r == NVML_ERROR_GPU_IS_LOST) {
        // A registered GPU fell off the bus, and the wait does not say
        // which: ask each one. A lost GPU stays out until it answers again.
        ProbeForLostGpus();
        Backoff(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
      } else if (r != NVML_ERROR_TIMEOUT) {
        // Never spin on a failing wait: back off, and say so now and then.
        ++errors;
        if (errors == 1 || errors % 50 == 0) {
          LogWarning("waiting for NVML events failed; backing off",
                     {{"error", lib->ErrorText(r)},
                      {"failures", StrCat(errors)},
                      {"retry_in", StrCat(backoff.count(), "ms")}});
        }
        Backoff(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
      }
      ProbeRecoveries();
    }
    Finish();
  }

  void Finish() {
    if (set != nullptr) lib->fn().EventSetFree(set);
    set = nullptr;
    std::lock_guard<std::mutex> lock(mu);
    exited = true;
    cv.notify_all();
  }
};

std::unique_ptr<HealthWatcher> HealthWatcher::Start(std::shared_ptr<const NvmlLibrary> lib,
                                                    std::vector<std::string> uuids,
                                                    std::set<std::string> initially_unhealthy,
                                                    HealthPolicy policy, Callback callback) {
  auto state = std::make_shared<State>();
  state->lib = std::move(lib);
  state->uuids = std::move(uuids);
  state->policy = std::move(policy);
  state->callback = std::move(callback);
  if (state->policy.disabled) {
    LogInfo("GPU health checks are disabled by config");
    state->exited = true;
    return std::unique_ptr<HealthWatcher>(new HealthWatcher(state));
  }
  if (!state->Setup(initially_unhealthy)) {
    // Nothing to wait on; still report the GPUs that start out unhealthy.
    state->Finish();
    return std::unique_ptr<HealthWatcher>(new HealthWatcher(state));
  }
  // The thread holds its own reference, so it may outlive the watcher.
  std::thread([state] { state->Run(); }).detach();
  return std::unique_ptr<HealthWatcher>(new HealthWatcher(state));
}

HealthWatcher::~HealthWatcher() { Stop(); }

std::map<int, uint64_t> HealthWatcher::XidCounts() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->xids;
}

void HealthWatcher::Stop() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->stop = true;
  state_->reporting = false;
  state_->cv.notify_all();
  // A report already under way finishes before Stop() returns.
  state_->cv.wait(lock, [this] { return state_->reports_in_flight == 0; });
  // Usually the thread is in nvmlEventSetWait, which cannot be interrupted;
  // it notices `stop` when the wait returns. Reporting is already off.
  state_->cv.wait_for(lock, std::chrono::milliseconds(50), [this] { return state_->exited; });
}

}  // namespace gpu_agent::nvml
