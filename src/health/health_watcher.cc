#include "health/health_watcher.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"
#include "health/health_watcher_state.h"
#include "health/thread_count.h"

namespace gpu_agent::health {
namespace {

ThreadCount& Threads() {
  static ThreadCount* count = new ThreadCount;  // never destroyed: threads may end at exit
  return *count;
}

// The threads of stopped watchers, until they end and are joined. A
// thread's state stays here (shared with its watcher, if that still
// lives) until the join.
struct StoppedThreads {
  std::mutex mu;
  std::condition_variable cv;  // a listed thread ended
  std::vector<std::shared_ptr<HealthWatcher::State>> states;
};

StoppedThreads& Stopped() {
  static StoppedThreads* s = new StoppedThreads;  // never destroyed: threads may end at exit
  return *s;
}

bool AllEnded(const StoppedThreads& s) {
  return std::all_of(s.states.begin(), s.states.end(), [](const auto& st) { return st->ended; });
}

// Joins the listed threads that ended. REQUIRES: s.mu held (an ended thread
// has let go of it for good).
void JoinEndedLocked(StoppedThreads& s) {
  for (auto it = s.states.begin(); it != s.states.end();) {
    if (!(*it)->ended) {
      ++it;
      continue;
    }
    (*it)->thread.join();
    it = s.states.erase(it);
  }
}

}  // namespace

int HealthWatcher::ThreadsRunning() { return Threads().running(); }

int HealthWatcher::JoinStopped(std::chrono::milliseconds within) {
  StoppedThreads& s = Stopped();
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait_for(lock, within, [&s] { return AllEnded(s); });
  JoinEndedLocked(s);
  return static_cast<int>(s.states.size());
}

std::unique_ptr<HealthWatcher> HealthWatcher::Start(std::shared_ptr<const nvml::NvmlLibrary> lib,
                                                    std::vector<std::string> uuids,
                                                    std::set<std::string> initially_unhealthy,
                                                    HealthPolicy policy, Callback callback,
                                                    std::vector<Outage> carried, const Clock* clock,
                                                    CheckCallback on_check) {
  JoinStopped(std::chrono::milliseconds(0));
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
    return std::unique_ptr<HealthWatcher>(new HealthWatcher(std::move(state)));
  }
  if (!state->Setup(initially_unhealthy, carried)) {
    // Nothing to wait on; still report the GPUs that start out unhealthy.
    state->Release();
    return std::unique_ptr<HealthWatcher>(new HealthWatcher(std::move(state)));
  }
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->running = true;
    state->beat = clock->Now();
  }
  // Once stopped, joined from the stopped threads' list, which keeps the
  // state the thread uses until then; the thread frees what only it uses
  // (the event set it waits on, the poller, the handles) itself.
  State* s = state.get();
  s->thread = std::thread([s] {
    {
      ThreadCount::Scope counted(&Threads());
      NameThisThread("health");
      s->Run();
      s->Release();
    }
    StoppedThreads& stopped = Stopped();
    std::lock_guard<std::mutex> lock(stopped.mu);
    s->ended = true;  // the last touch of `s`
    stopped.cv.notify_all();
  });
  return std::unique_ptr<HealthWatcher>(new HealthWatcher(std::move(state)));
}

HealthWatcher::HealthWatcher(std::shared_ptr<State> state) : state_(std::move(state)) {}

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
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->reporting = false;
    state_->cv.notify_all();
    state_->cv.wait(lock, [this] { return state_->reports_in_flight == 0; });
    // What the thread is doing between two waits (an event, a poll, a
    // probe) ends first, so Outages() and XidCounts() hold all it found; a
    // poll looks at `stop` between GPUs. Bounded: an NVML call that hangs
    // must not hold up a reload or a SIGTERM for good.
    const auto bound = state_->policy.wait_timeout + std::chrono::seconds(2);
    if (!state_->cv.wait_for(lock, bound, [this] { return !state_->busy || state_->exited; })) {
      LogWarning("stopping GPU health while its thread is in an NVML call that has not returned",
                 {{"waited_ms", StrCat(bound.count())}});
    }
  }
  // Usually the thread is in nvmlEventSetWait, which cannot be interrupted:
  // it sees `stop` when that wait returns, within policy.wait_timeout, and
  // ends. Waiting for that here would hold up every reload and SIGTERM (or
  // for good, on a hung NVML call), and a shorter wait would wake the idle
  // agent more often: the thread goes to the stopped list instead.
  std::lock_guard<std::mutex> join(state_->join_mu);
  if (state_->handed_over || !state_->thread.joinable()) return;
  state_->handed_over = true;
  StoppedThreads& stopped = Stopped();
  std::lock_guard<std::mutex> lock(stopped.mu);
  stopped.states.push_back(state_);
  JoinEndedLocked(stopped);
}

}  // namespace gpu_agent::health
