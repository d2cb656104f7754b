// The GPU health watcher's policy, from the health.* settings.
#ifndef GPU_AGENT_AGENT_RUN_HEALTH_POLICY_H_
#define GPU_AGENT_AGENT_RUN_HEALTH_POLICY_H_

#include "agent/config/config.h"
#include "health/health_watcher.h"

namespace gpu_agent {

health::HealthPolicy HealthPolicyFrom(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_HEALTH_POLICY_H_
