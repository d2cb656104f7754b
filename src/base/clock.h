// The steady time a component reads, behind one seam so that tests step it
// instead of waiting for it (leveldb's Env idea, for time alone). Production
// code takes a `const Clock*` that defaults to Clock::Real(); a test passes
// a FakeClock (tests/support/fake_clock.h) and advances it.
#ifndef GPU_AGENT_BASE_CLOCK_H_
#define GPU_AGENT_BASE_CLOCK_H_

#include <chrono>

namespace gpu_agent {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  // Thread-safe.
  virtual TimePoint Now() const = 0;

  // How long a thread should block to reach `deadline` on this clock, as a
  // real duration for a condition variable or NVML wait: 0 once it has
  // passed. With a fake clock the wait is real, so a component that waits
  // must still come round within a bounded real time to read Now() again.
  std::chrono::milliseconds Until(TimePoint deadline) const {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Now());
    return left.count() > 0 ? left : std::chrono::milliseconds(0);
  }

  // The process's steady clock. Never null; lives for the whole process.
  static const Clock* Real();
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_CLOCK_H_
