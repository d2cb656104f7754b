// The watcher's event thread: the event set made and every GPU registered
// (on the caller's thread, before the thread starts), then the loop that
// waits for XID events with a bounded timeout, backs off after a failing
// wait, runs the polled checks when due and probes what is out.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>

#include "base/log.h"
#include "base/strings.h"
#include "health/health_watcher_state.h"
#include "health/repair_state.h"

namespace gpu_agent::health {

// Creates the event set and registers every GPU. Runs on the caller's
// thread, so events are watched once Start() returns. False: no events.
bool HealthWatcher::State::Setup(const std::set<std::string>& initially_unhealthy,
                                 const std::vector<Outage>& carried) {
  handles = std::make_unique<nvml::GpuHandles>(*lib, uuids);
  for (const std::string& uuid : initially_unhealthy) {
    MarkBad(DeviceKey::Gpu(uuid), "NVML: lost at discovery (GPU_IS_LOST)", -1,
            /*needs_reset=*/true,
            /*was_lost=*/true);
  }
  for (const Outage& o : carried) {
    if (std::find(uuids.begin(), uuids.end(), o.key.uuid) == uuids.end()) continue;  // deselected
    MarkBad(o.key, o.reason, o.xid, o.needs_reset, o.was_lost, o.check);
  }
  // A GPU the driver still asks to be reset (from before the agent
  // started) starts out, as if its XID had just come.
  for (const auto& [uuid, what, xid] : PendingRepairs(*lib, *handles, uuids)) {
    if (!book.IsOut(DeviceKey::Gpu(uuid))) {
      MarkBad(DeviceKey::Gpu(uuid), StrCat("at start: ", what), xid, /*needs_reset=*/true);
    }
  }
  // The polled checks, first run on the thread's first turn.
  poller = std::make_unique<HealthPoller>(*lib, handles.get(), uuids, policy.checks, clock);
  next_poll = clock->Now();
  events = std::make_unique<EventRegistry>(*lib, handles.get());
  if (!events->Create()) {
    events.reset();
    return false;
  }
  size_t watched = 0;
  for (const std::string& uuid : uuids) {
    if (!initially_unhealthy.count(uuid) && !book.IsOut(DeviceKey::Gpu(uuid))) Register(uuid);
    if (events->Watches(uuid)) ++watched;
  }
  LogInfo("watching XID events", {{"gpus", StrCat(uuids.size())}, {"watched", StrCat(watched)}});
  return true;
}

// The thread's loop. NVML's event wait cannot be interrupted: each wait is
// at most policy.wait_timeout long, and the stop flag is read between waits
// (Stop() does not wait for them: health_watcher.h). From a wait's end to
// the next wait the thread is `busy`: it may mark GPUs out, and Stop() waits
// for that to end, so what it found is in Outages() when Stop() returns.
void HealthWatcher::State::Run() {
  for (;;) {
    std::chrono::milliseconds timeout;
    {
      std::lock_guard<std::mutex> lock(mu);
      busy = false;
      cv.notify_all();
      if (stop) break;
      beat = clock->Now();
      timeout = NextTimeout();  // here: nothing after a Stop() reads the clock
    }
    nvmlEventData_t ev{};
    const nvmlReturn_t r = events->Wait(&ev, timeout);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) break;
      busy = true;
    }
    if (r == NVML_SUCCESS) {
      wait_errors = 0;
      backoff.Reset();
      HandleEvent(ev);
    } else if (r != NVML_ERROR_TIMEOUT) {
      OnWaitFailed(r);
    }
    if (poller && clock->Now() >= next_poll) PollChecks();
    ProbeRecoveries();
  }
  std::lock_guard<std::mutex> lock(mu);
  exited = true;
  cv.notify_all();
}

void HealthWatcher::State::OnWaitFailed(nvmlReturn_t r) {
  const std::chrono::milliseconds wait = backoff.Next();
  if (r == NVML_ERROR_GPU_IS_LOST) {
    // A registered GPU fell off the bus, and the wait does not say which:
    // ask each one. A lost GPU stays out until it is reset.
    ProbeForLostGpus();
  } else if (++wait_errors == 1 || wait_errors % 50 == 0) {
    LogWarning("waiting for NVML events failed; backing off",
               {{"error", lib->ErrorText(r)},
                {"failures", StrCat(wait_errors)},
                {"retry_in", StrCat(wait.count(), "ms")}});
  }
  // Never spin on a failing wait.
  Sleep(wait);
}

// Frees what the thread used, the event set last but the handles: by the
// thread itself when it ends (or by Start, for a thread never started).
void HealthWatcher::State::Release() {
  poller.reset();
  events.reset();
  handles.reset();
  std::lock_guard<std::mutex> lock(mu);
  exited = true;
  cv.notify_all();
}

bool HealthWatcher::State::Stopping() {
  std::lock_guard<std::mutex> lock(mu);
  return stop;
}

// Sleeps up to `d` unless asked to stop. Used only for error backoff.
void HealthWatcher::State::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, d, [this] { return stop; });
}

void HealthWatcher::State::Register(const std::string& uuid) {
  if (absl::Status st = events->Register(uuid); !st.ok()) {
    MarkBad(DeviceKey::Gpu(uuid), std::string(st.message()), -1);
  }
}

std::chrono::milliseconds HealthWatcher::State::NextTimeout() const {
  std::chrono::milliseconds cap = policy.wait_timeout;
  if (poller) cap = std::min(cap, clock->Until(next_poll));
  if (policy.recovery_period.count() == 0) return cap;
  return book.UntilNextProbe(cap);
}

// Handles the events already queued, without waiting (a bounded number).
// A wait here may answer GPU_IS_LOST as the loop's own does, and that
// answer may not come again: the lost GPU is looked for now, or it would
// stay in until a poll happened to ask it.
void HealthWatcher::State::DrainEvents() {
  if (!events) return;
  for (int i = 0; i < 64; ++i) {
    nvmlEventData_t ev{};
    const nvmlReturn_t r = events->Wait(&ev, std::chrono::milliseconds(0));
    if (r == NVML_ERROR_GPU_IS_LOST) ProbeForLostGpus();
    if (r != NVML_SUCCESS) return;
    HandleEvent(ev);
  }
}

void HealthWatcher::State::HandleEvent(const nvmlEventData_t& ev) {
  const std::string uuid = events->UuidOf(ev.device);
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
    for (const std::string& u : uuids) {
      MarkBad(DeviceKey::Gpu(u), StrCat("XID ", xid), xid, policy.NeedsReset(xid));
    }
    return;
  }
  // NVML scopes an XID to a MIG instance by setting its ids.
  auto id = [](unsigned v) { return v == NVML_MIG_INSTANCE_ID_NONE ? -1 : static_cast<int>(v); };
  const int gi = id(ev.gpuInstanceId);
  const DeviceKey key{uuid, gi, gi < 0 ? DeviceKey::kWhole : id(ev.computeInstanceId)};
  // Already out: MarkBad restarts its quiet period, and a reset-class XID
  // makes it need a reset.
  MarkBad(key, StrCat("XID ", xid), xid, policy.NeedsReset(xid));
}

}  // namespace gpu_agent::health
