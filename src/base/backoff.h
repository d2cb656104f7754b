// The one retry rule of every watcher and API client loop: exponential
// backoff with jitter that starts over only after a quiet stretch (as
// client-go's reflector does). Resetting after each success instead (a
// successful LIST, say) lets a server that fails the next step every time
// (a watch answered 410 at once, forever) drive a request storm.
#ifndef GPU_AGENT_BASE_BACKOFF_H_
#define GPU_AGENT_BASE_BACKOFF_H_

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/duration.h"

namespace gpu_agent {

class Backoff {
 public:
  // The first wait after a quiet stretch is `first` (0: try again at once),
  // the next `initial`, then twice the last up to `max`, each jittered by
  // +-20 % (base/duration's Jitter). `quiet`: with no Next() for that long,
  // the sequence starts over; it must be longer than `max` (default twice
  // it), or a storm paced at `max` would pass for quiet.
  Backoff(Duration initial, Duration max, Duration first = Duration(-1),
          Duration quiet = Duration(0), const Clock* clock = Clock::Real());

  // Waits `initial`, then twice the last up to `max`, jittered: the plain
  // doubling retry (the first try after a quiet stretch waits `initial`).
  // No wait is over `max`, `initial` included. `quiet` as above.
  static Backoff Doubling(Duration initial, Duration max, const Clock* clock = Clock::Real(),
                          Duration quiet = Duration(0)) {
    return Backoff(std::min(2 * initial, max), max, std::min(initial, max), quiet, clock);
  }

  // The wait before the next try, and the sequence one step on.
  Duration Next();
  // As Next, without the jitter: for a period an operator set (a grace
  // period, say), which must not come early.
  Duration NextExact();
  // Starts the sequence over (an operator's reload, say).
  void Reset() { step_ = 0; }
  // Tries in a row so far (0 after Reset; a quiet stretch shows at Next).
  int step() const { return step_; }
  // Whether the next Next() starts the sequence over: the first try, or
  // the first after a quiet stretch.
  bool Quiet() const { return step_ == 0 || clock_->Now() - last_at_ >= quiet_; }

 private:
  const Duration initial_, max_, first_, quiet_;
  const Clock* const clock_;
  int step_ = 0;
  Duration last_{0};
  Clock::TimePoint last_at_{};
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_BACKOFF_H_
