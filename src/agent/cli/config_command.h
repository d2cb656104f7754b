// `gpu-agent config`: the effective configuration, each value with its origin.
#ifndef GPU_AGENT_AGENT_CLI_CONFIG_COMMAND_H_
#define GPU_AGENT_AGENT_CLI_CONFIG_COMMAND_H_

#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

// The effective configuration as YAML, each value commented with its origin.
std::string ConfigReport(LoadedConfig& loaded);

struct ConfigCommandOptions {
  // Print what `run` would advertise (plan_report.h) instead of the config.
  bool plan = false;
  std::string output;  // "", "text", "json" or "yaml"; json and text only with `plan`
};

// Builds the generation `run` builds (the GPUs NVML reports, devices.*,
// the MIG strategy, sharing, the CDI spec), so a config `run` refuses is
// refused here with run's message and exit code (2 for a config in error).
// Then prints ConfigReport, or with `plan` the plan, to stdout; warnings go
// to stderr. Without NVML (a CI job linting ConfigMaps, a machine without
// a driver) the report is still printed, stderr says the checks against
// the node were skipped, and the exit code is 0; `plan` fails there (1),
// having nothing to plan. Returns the process exit code (exit_code.h).
int ConfigCommand(LoadedConfig& loaded, const ConfigCommandOptions& options);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_CONFIG_COMMAND_H_
