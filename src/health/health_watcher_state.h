// What the health watcher's thread works on, and what the watcher's readers
// see of it. Internal to the watcher: its parts are split by concept over
//   health_watcher.cc           starting, stopping and reading the watcher
//   health_watcher_events.cc    the event thread: setup, its loop, XID events
//   health_watcher_checks.cc    the polled checks and how they are judged
//   health_watcher_recovery.cc  probing GPUs that are out, lost or back
//   health_watcher_reports.cc   marking GPUs out and the reports to callers
#ifndef GPU_AGENT_HEALTH_HEALTH_WATCHER_STATE_H_
#define GPU_AGENT_HEALTH_HEALTH_WATCHER_STATE_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/backoff.h"
#include "base/clock.h"
#include "health/event_registry.h"
#include "health/health_poller.h"
#include "health/health_watcher.h"
#include "health/outage_book.h"
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
        book(c, policy.recovery_period),
        backoff(Backoff::Doubling(std::chrono::milliseconds(100), policy.max_backoff, c)) {}

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
  bool reporting = true;            // protected by mu; false once Stop() begins
  int reports_in_flight = 0;        // protected by mu: callbacks under way
  bool busy = false;                // protected by mu: between an event wait's end and the next
  std::map<int, uint64_t> xids;     // protected by mu
  bool vouched = false;             // protected by mu: OperatorVouches() not yet acted on
  bool running = false;             // protected by mu: the thread was started
  Clock::TimePoint beat;            // protected by mu: the thread last came round its loop
  std::vector<Outage> outages;      // protected by mu: book.Snapshot() as last changed
  std::vector<CheckStatus> checks;  // protected by mu: as judged at the last poll
  uint64_t polls = 0;               // protected by mu
  uint64_t poll_calls = 0;          // protected by mu

  // The thread. Once stopped it goes to the stopped threads' list (under
  // join_mu, so two Stops hand it over once), which joins it when it ends.
  std::mutex join_mu;
  std::thread thread;
  bool handed_over = false;  // protected by join_mu
  bool ended = false;        // protected by the stopped list's lock: the thread's function returned

  // Thread-only state (the caller's before the thread starts; the thread
  // frees it when it ends).
  std::unique_ptr<nvml::GpuHandles> handles;  // set by Setup()
  std::unique_ptr<EventRegistry> events;      // null when no event API
  OutageBook book;                            // what is out
  std::unique_ptr<HealthPoller> poller;       // set by Setup()
  Clock::TimePoint next_poll;
  Backoff backoff;  // after a failing event wait
  int wait_errors = 0;
  // Each GPU's level on each check, and the GPUs with a check failing at
  // severity unhealthy (kept out whatever else shows).
  std::map<std::pair<std::string, CheckId>, Severity> levels;
  std::set<std::string> failing_unhealthy;
  // Checks an operator vouched past (SIGUSR1) while they failed: they hold
  // their GPU out again only once they have passed and fail anew.
  std::set<std::pair<std::string, CheckId>> vouched_checks;

  // health_watcher_reports.cc
  template <typename Change, typename Fn>
  void Deliver(const Fn& fn, const Change& change);
  void Report(const HealthChange& change);
  void ReportCheck(const CheckChange& change);
  void MarkBad(const DeviceKey& key, const std::string& reason, int xid, bool needs_reset = false,
               bool was_lost = false, const std::string& check = "");
  void MirrorOutages();

  // health_watcher_checks.cc
  void PollChecks();
  void Judge(const std::vector<GpuVerdict>& verdicts, bool whole_poll = true);

  // health_watcher_recovery.cc
  nvmlReturn_t AnswerFor(const std::string& uuid, nvmlDevice_t* dev);
  void ProbeForLostGpus();
  void ProbeRecoveries();

  // health_watcher_events.cc
  bool Setup(const std::set<std::string>& initially_unhealthy, const std::vector<Outage>& carried);
  void Run();
  void Release();
  bool Stopping();
  void Register(const std::string& uuid);
  void DrainEvents();
  void HandleEvent(const nvmlEventData_t& ev);

 private:
  // health_watcher_checks.cc: judges one GPU's verdict into `statuses` and
  // `changes`.
  void JudgeOne(const GpuVerdict& v, std::vector<CheckStatus>* statuses,
                std::vector<CheckChange>* changes);
  // health_watcher_recovery.cc
  using OutageIt = std::map<DeviceKey, OutageBook::Entry>::iterator;
  OutageIt ProbeOne(OutageIt it, Clock::TimePoint now, bool vouched_now, bool* changed);
  bool HeldByFailingCheck(const std::string& uuid, bool vouched_for);
  void BringBack(const DeviceKey& key, bool was_reset, bool vouched_for);
  // health_watcher_events.cc
  std::chrono::milliseconds NextTimeout() const;
  void OnWaitFailed(nvmlReturn_t r);
  void Sleep(std::chrono::milliseconds d);
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_WATCHER_STATE_H_
