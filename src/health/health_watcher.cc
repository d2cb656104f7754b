#include "health/health_watcher.h"

#include <chrono>
#include <mutex>
#include <thread>

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

}  // namespace

int HealthWatcher::ThreadsRunning() { return Threads().running(); }

std::unique_ptr<HealthWatcher> HealthWatcher::Start(std::shared_ptr<const nvml::NvmlLibrary> lib,
                                                    std::vector<std::string> uuids,
                                                    std::set<std::string> initially_unhealthy,
                                                    HealthPolicy policy, Callback callback,
                                                    std::vector<Outage> carried, const Clock* clock,
                                                    CheckCallback on_check) {
  auto state = std::make_unique<State>(std::move(lib), std::move(uuids), std::move(policy),
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
  // Joined by Stop(), which the watcher's destructor calls: the state the
  // thread uses outlives it.
  State* s = state.get();
  s->thread = std::thread([s] {
    ThreadCount::Scope counted(&Threads());
    NameThisThread("health");
    s->Run();
  });
  return std::unique_ptr<HealthWatcher>(new HealthWatcher(std::move(state)));
}

HealthWatcher::HealthWatcher(std::unique_ptr<State> state) : state_(std::move(state)) {}

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
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->reporting = false;  // a report under way ends before the join does
    state_->cv.notify_all();
  }
  // Usually the thread is in nvmlEventSetWait, which cannot be interrupted:
  // it sees `stop` when that wait returns, within policy.stop_within. The
  // event set is freed only once the thread that waits on it is gone.
  std::lock_guard<std::mutex> join(state_->join_mu);
  if (!state_->thread.joinable()) return;
  state_->thread.join();
  state_->Release();
}

}  // namespace gpu_agent::health
