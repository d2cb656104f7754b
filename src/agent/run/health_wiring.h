// What every mode's health runs with, from the health.* settings: the
// watcher's policy, and the Node's health events and condition.
#ifndef GPU_AGENT_AGENT_RUN_HEALTH_WIRING_H_
#define GPU_AGENT_AGENT_RUN_HEALTH_WIRING_H_

#include <memory>
#include <string_view>

#include "agent/config/config.h"
#include "health/health_notes.h"
#include "health/health_watcher.h"

namespace gpu_agent {

health::HealthPolicy HealthPolicyFrom(const Config& config);

// The notes of `mode` ("plugin", "static", "dra"): its reporter started
// when health.nodeEvents calls for it (auto: in static mode only);
// otherwise, or when no API connection can be made, notes that are off,
// after a log line saying so and why.
std::shared_ptr<health::HealthNotes> StartHealthNotes(const Config& config, std::string_view mode);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_HEALTH_WIRING_H_
