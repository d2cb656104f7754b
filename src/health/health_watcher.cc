#include "health/health_watcher.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"
#include "health/event_registry.h"
#include "health/health_poller.h"
#include "health/outage_book.h"
#include "health/repair_state.h"
#include "nvml/gpu_handles.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::health {

struct HealthWatcher::State {
  State(std::shared_ptr<const nvml::NvmlLibrary> l, std::vector<std::string> u, HealthPolicy p,
        Callback cb, CheckCallback ccb, const Clock* c)
      : lib(std::move(l)),
        uuids(std::move(u)),
        policy(std::move(p)),
        callback(std::move(cb)),
        on_check(std::move(ccb)),
        clock(c),
        book(c, policy.recovery_period) {}

  // Constant after construction.
  const std::shared_ptr<const nvml::NvmlLibrary> lib;
  const std::vector<std::string> uuids;
  const HealthPolicy policy;
  const Callback callback;
  const CheckCallback on_check;  // may be null
  const Clock* const clock;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;                // protected by mu
  bool exited = false;              // protected by mu
  bool reporting = true;            // protected by mu; false once Stop() returns
  int reports_in_flight = 0;        // protected by mu: callbacks running now
  std::map<int, uint64_t> xids;     // protected by mu
  bool vouched = false;             // protected by mu: OperatorVouches() not yet acted on
  bool running = false;             // protected by mu: the thread was started
  Clock::TimePoint beat;            // protected by mu: the thread last came round its loop
  std::vector<Outage> outages;      // protected by mu: book.Snapshot() as last changed
  std::vector<CheckStatus> checks;  // protected by mu: as judged at the last poll
  uint64_t polls = 0;               // protected by mu
  uint64_t poll_calls = 0;          // protected by mu

  // Thread-only state.
  std::unique_ptr<nvml::GpuHandles> handles;  // set by Setup()
  std::unique_ptr<EventRegistry> events;      // null when no event API
  OutageBook book;                            // what is out; the thread's alone
  std::unique_ptr<HealthPoller> poller;       // set by Setup()
  Clock::TimePoint next_poll;                 // the thread's alone
  // Each GPU's level on each check, and the GPUs with a check failing at
  // severity unhealthy (kept out whatever else shows); the thread's alone.
  std::map<std::pair<std::string, CheckId>, Severity> levels;
  std::set<std::string> failing_unhealthy;
  // Checks an operator vouched past (SIGUSR1) while they failed: they hold
  // their GPU out again only once they have passed and fail anew.
  std::set<std::pair<std::string, CheckId>> vouched_checks;

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
  void ReportCheck(const CheckChange& change) {
    if (!on_check) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!reporting) return;
      ++reports_in_flight;
    }
    on_check(change);
    std::lock_guard<std::mutex> lock(mu);
    --reports_in_flight;
    cv.notify_all();
  }

  // One poll of every GPU's checks: levels updated and reported, a check
  // failing at severity unhealthy marks its GPU out the way a reset-class
  // XID does, a GPU NVML calls lost goes out as lost. GPUs already out for
  // an XID are polled too: their checks still say what is wrong.
  // One GPU at a time, handling the events queued meanwhile after each: an
  // XID waits for at most one GPU's queries, not the whole poll's.
  void PollChecks() {
    next_poll = clock->Now() + policy.poll_interval;
    for (const std::string& uuid : uuids) {
      Judge({poller->PollOne(uuid)}, /*whole_poll=*/false);
      DrainEvents();
    }
    std::lock_guard<std::mutex> lock(mu);
    ++polls;
    poll_calls = poller->poll_calls();
  }

  // Judges polled verdicts; the statuses of GPUs not among them stand.
  // `whole_poll`: count it as a poll.
  void Judge(const std::vector<GpuVerdict>& verdicts, bool whole_poll = true) {
    std::vector<CheckStatus> statuses;
    std::vector<CheckChange> changes;
    for (const GpuVerdict& v : verdicts) {
      const DeviceKey gpu = DeviceKey::Gpu(v.uuid);
      if (v.lost) {
        // An XID that came with it (79) names it better: handle what the
        // event set holds first.
        DrainEvents();
        if (!book.IsOut(gpu)) {
          MarkBad(gpu, "NVML: the GPU has fallen off the bus (GPU_IS_LOST)", -1,
                  /*needs_reset=*/true, /*was_lost=*/true);
        }
        continue;
      }
      bool unhealthy = false;
      for (const CheckResult& r : v.results) {
        const CheckSpec& spec = Spec(r.id);
        Severity& level = levels[{v.uuid, r.id}];
        Severity now = level;
        if (r.state == CheckState::kFailing) {
          now = policy.checks[r.id].severity;
        } else if (r.state == CheckState::kPass || r.state == CheckState::kBaseline ||
                   r.state == CheckState::kOff) {
          now = Severity::kOk;
        }  // kUnknown: NVML did not answer this time; the level stands
        if (r.state != CheckState::kOff && r.state != CheckState::kUnknown) {
          statuses.push_back({v.uuid, r.id, now, r.value, r.number});
        }
        if (now != level) {
          changes.push_back({{v.uuid, r.id, now, r.value, r.number}, level});
          Log(now == Severity::kOk ? LogLevel::kInfo : LogLevel::kWarning,
              now == Severity::kOk ? "GPU health check passes again" : "GPU health check failing",
              {{"uuid", v.uuid},
               {"check", std::string(spec.name)},
               {"level", std::string(SeverityName(now))},
               {"value", r.value}});
          level = now;
        }
        if (now != Severity::kUnhealthy) vouched_checks.erase({v.uuid, r.id});
        if (now == Severity::kUnhealthy && vouched_checks.count({v.uuid, r.id}) == 0) {
          unhealthy = true;
          // As a reset-class XID: each poll that still fails starts the
          // quiet period again. A GPU already held for a reset (an XID, or
          // another check) keeps its reason and evidence rules; the check
          // failing holds it out besides.
          auto out = book.entries().find(gpu);
          if (out == book.entries().end() || !out->second.needs_reset) {
            MarkBad(gpu, StrCat("health check ", spec.name, ": ", r.value), spec.evidence_xid,
                    spec.needs_reset, /*was_lost=*/false, std::string(spec.name));
          }
        }
      }
      if (unhealthy) {
        failing_unhealthy.insert(v.uuid);
      } else {
        failing_unhealthy.erase(v.uuid);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      std::set<std::string> judged;
      for (const GpuVerdict& v : verdicts) judged.insert(v.uuid);
      for (const CheckStatus& c : checks) {
        if (!judged.count(c.uuid)) statuses.push_back(c);
      }
      checks = std::move(statuses);
      if (whole_poll) ++polls;
      poll_calls = poller->poll_calls();
    }
    for (const CheckChange& c : changes) ReportCheck(c);
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
    if (absl::Status st = events->Register(uuid); !st.ok()) {
      MarkBad(DeviceKey::Gpu(uuid), std::string(st.message()), -1);
    }
  }

  void MarkBad(const DeviceKey& key, const std::string& reason, int xid, bool needs_reset = false,
               bool was_lost = false, const std::string& check = "") {
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

  void MirrorOutages() {
    std::vector<Outage> copy = book.Snapshot();
    std::lock_guard<std::mutex> lock(mu);
    outages = std::move(copy);
  }

  // Whether `uuid` answers, asked on its own handle (`*dev`, null when it has
  // none): GPU_IS_LOST for this GPU alone, where a lookup by UUID would
  // answer it while any GPU is lost.
  nvmlReturn_t AnswerFor(const std::string& uuid, nvmlDevice_t* dev) {
    nvmlReturn_t r = NVML_SUCCESS;
    *dev = handles->Find(uuid, &r);
    return *dev == nullptr ? r : Answer(*lib, *dev);
  }

  void ProbeForLostGpus() {
    int lost = 0;
    for (const std::string& uuid : uuids) {
      const DeviceKey key = DeviceKey::Gpu(uuid);
      if (book.IsOut(key)) {
        // Already out as lost: the wait may go on answering for it.
        if (book.entries().at(key).was_lost) ++lost;
        continue;
      }
      // Only GPU_IS_LOST means lost; another error says nothing of health.
      nvmlDevice_t dev = nullptr;
      if (AnswerFor(uuid, &dev) != NVML_ERROR_GPU_IS_LOST) continue;
      ++lost;
      MarkBad(key, "NVML: the GPU has fallen off the bus (GPU_IS_LOST)", -1,
              /*needs_reset=*/true, /*was_lost=*/true);
    }
    if (lost == 0) {
      LogWarning("NVML's event wait answered GPU_IS_LOST, but every GPU still answers");
    }
  }

  void ProbeRecoveries() {
    bool vouched_now;
    {
      std::lock_guard<std::mutex> lock(mu);
      vouched_now = vouched;
      vouched = false;
    }
    if (policy.recovery_period.count() == 0 && !vouched_now) return;
    const auto now = clock->Now();
    bool changed = false;
    auto& unhealthy = book.entries();
    for (auto it = unhealthy.begin(); it != unhealthy.end();) {
      OutageBook::Entry& bad = it->second;
      const bool vouched_for = vouched_now && bad.needs_reset;
      if (bad.next_probe > now && !vouched_for) {
        ++it;
        continue;
      }
      const DeviceKey key = it->first;
      const std::string& uuid = key.uuid;
      nvmlDevice_t dev = nullptr;
      const nvmlReturn_t r = AnswerFor(uuid, &dev);
      if (r == NVML_ERROR_GPU_IS_LOST && !bad.was_lost) {
        bad.was_lost = true;
        changed = true;
      }
      if (r == NVML_SUCCESS && key.IsWholeGpu() && failing_unhealthy.count(uuid) > 0) {
        // Ask again now rather than at the next poll: a repair shows at once.
        Judge({poller->PollOne(uuid)});
      }
      if (r == NVML_SUCCESS && key.IsWholeGpu() && failing_unhealthy.count(uuid) > 0) {
        if (vouched_for) {
          // An operator's word, as for a reset-class XID: the checks that
          // fail now no longer hold the GPU out, until each has passed once.
          for (auto& [k, level] : levels) {
            if (k.first == uuid && level == Severity::kUnhealthy) vouched_checks.insert(k);
          }
          failing_unhealthy.erase(uuid);
        } else {
          // A polled check still fails at severity unhealthy: whatever the
          // quiet period, the GPU stays out.
          bad.next_probe = now + std::min(policy.recovery_period, policy.wait_timeout);
          ++it;
          continue;
        }
      }
      std::string missing;
      if (r == NVML_SUCCESS && bad.needs_reset && !vouched_for &&
          !ShowsReset(*lib, dev, bad.xid, bad.was_lost, &missing)) {
        if (!bad.waiting_said) {
          bad.waiting_said = true;
          LogWarning(
              "GPU answers but still needs a reset: keeping it out",
              {{"uuid", uuid},
               {"target", key.ToString()},
               {"reason", bad.reason},
               {"missing", missing},
               {"once_repaired", "reset the GPU (nvidia-smi -r), or send SIGUSR1 to gpu-agent"}});
        }
        bad.next_probe = now + std::min(policy.recovery_period, policy.wait_timeout);
        ++it;
        continue;
      }
      if (r == NVML_SUCCESS) {
        changed = true;
        const bool was_reset = key.IsWholeGpu() && (bad.was_lost || bad.needs_reset);
        it = unhealthy.erase(it);  // std::map: marks below leave `it` valid
        if (was_reset && events) {
          // A reset dropped the GPU's event registration with the rest of
          // its driver state: only a fresh one sees its next XID.
          for (const auto& [lost, why] :
               events->Rebuild(uuid, [this](const nvmlEventData_t& ev) { HandleEvent(ev); })) {
            MarkBad(DeviceKey::Gpu(lost), why, -1);
          }
        } else if (events && !events->Watches(uuid)) {
          Register(uuid);
        }
        // Marked again meanwhile (NVML lost it between the probe and the
        // registration): it stays out, and says so itself.
        if (book.IsOut(key)) continue;
        LogInfo(
            key.IsWholeGpu() ? "GPU healthy again" : "MIG instance healthy again",
            {{"uuid", uuid},
             {"target", key.ToString()},
             {"because", vouched_for ? "an operator vouched for it (SIGUSR1)" : "NVML answers"}});
        Report({key, true, "recovered", -1});
      } else {
        // Still lost: look again after another quiet period.
        it->second.next_probe = now + std::min(policy.recovery_period, policy.wait_timeout);
        ++it;
      }
    }
    if (changed) MirrorOutages();
  }

  std::chrono::milliseconds NextTimeout() const {
    std::chrono::milliseconds cap = policy.wait_timeout;
    if (poller) cap = std::min(cap, clock->Until(next_poll));
    if (policy.recovery_period.count() == 0) return cap;
    return book.UntilNextProbe(cap);
  }

  // Handles the events already queued, without waiting (a bounded number).
  // A wait here may answer GPU_IS_LOST as the loop's own does, and that
  // answer may not come again: the lost GPU is looked for now, or it would
  // stay in until a poll happened to ask it.
  void DrainEvents() {
    if (!events) return;
    for (int i = 0; i < 64; ++i) {
      nvmlEventData_t ev{};
      const nvmlReturn_t r = events->Wait(&ev, std::chrono::milliseconds(0));
      if (r == NVML_ERROR_GPU_IS_LOST) ProbeForLostGpus();
      if (r != NVML_SUCCESS) return;
      HandleEvent(ev);
    }
  }

  void HandleEvent(const nvmlEventData_t& ev) {
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

  // Creates the event set and registers every GPU. Runs on the caller's
  // thread, so events are watched once Start() returns. False: no events.
  bool Setup(const std::set<std::string>& initially_unhealthy, const std::vector<Outage>& carried) {
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

  void Run() {
    nvmlReturn_t r;
    int errors = 0;
    auto backoff = std::chrono::milliseconds(100);
    while (!Stopping()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        beat = clock->Now();
      }
      nvmlEventData_t ev{};
      r = events->Wait(&ev, NextTimeout());
      if (Stopping()) break;
      if (r == NVML_SUCCESS) {
        errors = 0;
        backoff = std::chrono::milliseconds(100);
        HandleEvent(ev);
      } else if (r != NVML_ERROR_TIMEOUT) {
        if (r == NVML_ERROR_GPU_IS_LOST) {
          // A registered GPU fell off the bus, and the wait does not say
          // which: ask each one. A lost GPU stays out until it is reset.
          ProbeForLostGpus();
        } else if (++errors == 1 || errors % 50 == 0) {
          LogWarning("waiting for NVML events failed; backing off",
                     {{"error", lib->ErrorText(r)},
                      {"failures", StrCat(errors)},
                      {"retry_in", StrCat(backoff.count(), "ms")}});
        }
        // Never spin on a failing wait.
        Backoff(backoff);
        backoff = std::min(backoff * 2, policy.max_backoff);
      }
      if (poller && clock->Now() >= next_poll) PollChecks();
      ProbeRecoveries();
    }
    Finish();
  }

  void Finish() {
    poller.reset();
    events.reset();
    handles.reset();
    std::lock_guard<std::mutex> lock(mu);
    exited = true;
    cv.notify_all();
  }
};

std::unique_ptr<HealthWatcher> HealthWatcher::Start(std::shared_ptr<const nvml::NvmlLibrary> lib,
                                                    std::vector<std::string> uuids,
                                                    std::set<std::string> initially_unhealthy,
                                                    HealthPolicy policy, Callback callback,
                                                    std::vector<Outage> carried, const Clock* clock,
                                                    CheckCallback on_check) {
  auto state = std::make_shared<State>(std::move(lib), std::move(uuids), std::move(policy),
                                       std::move(callback), std::move(on_check), clock);
  if (state->policy.disabled) {
    LogInfo("GPU health checks are disabled by config");
    // No XIDs are watched, but a GPU NVML calls lost is out all the same;
    // the watcher stays the one source of that too.
    for (const std::string& uuid : initially_unhealthy) {
      state->MarkBad(DeviceKey::Gpu(uuid), "NVML: lost at discovery (GPU_IS_LOST)", -1,
                     /*needs_reset=*/true, /*was_lost=*/true);
    }
    state->exited = true;
    return std::unique_ptr<HealthWatcher>(new HealthWatcher(state));
  }
  if (!state->Setup(initially_unhealthy, carried)) {
    // Nothing to wait on; still report the GPUs that start out unhealthy.
    state->Finish();
    return std::unique_ptr<HealthWatcher>(new HealthWatcher(state));
  }
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->running = true;
    state->beat = clock->Now();
  }
  // The thread holds its own reference, so it may outlive the watcher.
  std::thread([state] {
    NameThisThread("health");
    state->Run();
  }).detach();
  return std::unique_ptr<HealthWatcher>(new HealthWatcher(state));
}

HealthWatcher::~HealthWatcher() { Stop(); }

bool HealthWatcher::Alive(std::string* why) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->running || state_->exited) return true;
  // Each turn waits at most wait_timeout, or backs off at most max_backoff.
  const auto bound = 4 * state_->policy.wait_timeout + state_->policy.max_backoff;
  const auto quiet = state_->clock->Now() - state_->beat;
  if (quiet <= bound) return true;
  using std::chrono::duration_cast, std::chrono::milliseconds;
  *why = StrCat("the GPU health thread has not come round its loop for ",
                duration_cast<milliseconds>(quiet).count(), " ms (bound ", bound.count(),
                " ms): an NVML call hangs");
  return false;
}

std::vector<Outage> HealthWatcher::Outages() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->outages;
}

std::vector<CheckStatus> HealthWatcher::Checks() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->checks;
}

uint64_t HealthWatcher::Polls() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->polls;
}

uint64_t HealthWatcher::PollCalls() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->poll_calls;
}

void HealthWatcher::OperatorVouches() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->vouched = true;
  LogInfo("SIGUSR1: GPUs held for a reset come back once they answer");
}

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

}  // namespace gpu_agent::health
