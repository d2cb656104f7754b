// `gpu-agent devices`: the GPUs NVML finds, as a table, JSON or YAML.
#ifndef GPU_AGENT_AGENT_CLI_DEVICES_COMMAND_H_
#define GPU_AGENT_AGENT_CLI_DEVICES_COMMAND_H_

#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

// Prints the inventory to stdout in `output` ("json", "yaml", else a table);
// returns the process exit code (exit_code.h).
int DevicesCommand(const LoadedConfig& loaded, const std::string& output);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_DEVICES_COMMAND_H_
