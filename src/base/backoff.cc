#include "base/backoff.h"

#include <algorithm>

namespace gpu_agent {

Backoff::Backoff(Duration initial, Duration max, Duration first, Duration quiet, const Clock* clock)
    : initial_(initial),
      max_(std::max(max, initial)),
      first_(first.count() < 0 ? initial : first),
      quiet_(quiet.count() > 0 ? quiet : 2 * std::max(max, initial)),
      clock_(clock) {}

Duration Backoff::Next() {
  const Duration d = NextExact();
  return d.count() == 0 ? d : Jitter(d);
}

Duration Backoff::NextExact() {
  const Clock::TimePoint now = clock_->Now();
  if (step_ > 0 && now - last_at_ >= quiet_) step_ = 0;
  last_at_ = now;
  Duration d;
  if (step_ == 0) {
    d = first_;
  } else if (step_ == 1 || last_.count() == 0) {
    d = initial_;
  } else {
    d = std::min(last_ * 2, max_);
  }
  ++step_;
  last_ = d;
  return d;
}

}  // namespace gpu_agent
