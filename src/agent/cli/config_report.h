// `gpu-agent config`: the effective configuration, each value with its origin.
#ifndef GPU_AGENT_AGENT_CLI_CONFIG_REPORT_H_
#define GPU_AGENT_AGENT_CLI_CONFIG_REPORT_H_

#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

// The effective configuration as YAML, each value commented with its origin.
std::string ConfigReport(LoadedConfig& loaded);

// Prints ConfigReport to stdout; returns the process exit code (exit_code.h).
int ConfigCommand(LoadedConfig& loaded);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_CONFIG_REPORT_H_
