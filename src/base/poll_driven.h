// Work that needs no thread of its own: it names the descriptors it waits on
// and when it is next due, and whichever thread polls them calls Turn when one
// is readable or the time has come. `run`'s main thread drives plugin mode's
// supervisor this way, beside its signals, so an idle agent has one thread
// waiting on descriptors instead of two.
#ifndef GPU_AGENT_BASE_POLL_DRIVEN_H_
#define GPU_AGENT_BASE_POLL_DRIVEN_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace gpu_agent {

class PollDriven {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~PollDriven() = default;

  // The descriptors to poll for reading; fixed for the object's life.
  virtual std::vector<int> Descriptors() const = 0;

  // Reads what is ready on the descriptors (never blocks), does what is due
  // and returns when it is next due (TimePoint::max(): only a descriptor
  // wakes it). Only the driving thread calls it; it may call it at any time,
  // with nothing ready, which must be harmless.
  virtual TimePoint Turn() = 0;
};

// poll(2)'s timeout for waiting until `due`: -1 (no timeout) for
// TimePoint::max(), else the milliseconds left rounded up, 0 to a day.
inline int PollTimeoutMs(PollDriven::TimePoint due) {
  if (due == PollDriven::TimePoint::max()) return -1;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(due - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, int64_t{24} * 3600 * 1000));
}

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_POLL_DRIVEN_H_
