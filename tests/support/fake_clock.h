// A Clock that moves only when a test advances it, so tests of timers
// (quiet periods, fight windows, liveness bounds) step time instead of
// waiting for it. Thread-safe: the component reads it on its own thread.
#ifndef GPU_AGENT_TESTS_SUPPORT_FAKE_CLOCK_H_
#define GPU_AGENT_TESTS_SUPPORT_FAKE_CLOCK_H_

#include <chrono>
#include <mutex>

#include "base/clock.h"

namespace gpu_agent::testing {

class FakeClock final : public Clock {
 public:
  // Starts at an arbitrary point well away from the steady clock's epoch,
  // so that "now minus a period" never goes below it.
  FakeClock() : now_(TimePoint() + std::chrono::hours(1000)) {}

  TimePoint Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(std::chrono::milliseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  TimePoint now_;  // protected by mu_
};

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_FAKE_CLOCK_H_
