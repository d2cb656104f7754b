// Validation of a loaded config as a whole, beside the settings table
// (config_schema.h), which checks each value as it is parsed.
#ifndef GPU_AGENT_AGENT_CONFIG_CONFIG_VALIDATION_H_
#define GPU_AGENT_AGENT_CONFIG_CONFIG_VALIDATION_H_

#include "absl/status/status.h"
#include "agent/config/config.h"

namespace gpu_agent {

// Checks rules across settings (resource names, replicas, ...). Errors name the key.
absl::Status ValidateConfig(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_CONFIG_VALIDATION_H_
