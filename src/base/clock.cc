#include "base/clock.h"

namespace gpu_agent {
namespace {

class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

const Clock* Clock::Real() {
  static const SteadyClock* const clock = new SteadyClock;
  return clock;
}

}  // namespace gpu_agent
