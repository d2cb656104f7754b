// health.* settings to health::HealthPolicy.
#include "agent/run/health_policy.h"

#include <algorithm>
#include <chrono>

namespace gpu_agent {

health::HealthPolicy HealthPolicyFrom(const Config& c) {
  health::HealthPolicy p;
  p.disabled = c.health.disabled;
  p.ignored_xids = {c.health.ignored_xids.begin(), c.health.ignored_xids.end()};
  p.critical_xids = {c.health.critical_xids.begin(), c.health.critical_xids.end()};
  p.reset_xids = {c.health.reset_xids.begin(), c.health.reset_xids.end()};
  p.recovery_period = c.health.recovery_period;
  p.wait_timeout = c.health.event_wait_timeout;
  p.poll_interval = std::chrono::duration_cast<std::chrono::milliseconds>(c.health.poll_interval);
  p.checks = c.health.checks;
  // Short: the thread sees no XID while it backs off, so a burst of failed
  // waits must not blind it for long; 1 s is still far from spinning.
  p.max_backoff = std::min<std::chrono::milliseconds>(2 * p.wait_timeout, std::chrono::seconds(1));
  return p;
}

}  // namespace gpu_agent
