// `gpu-agent health`: one poll of every health check on every GPU, printed
// (as `dcgmi health -c` gives), with NVML's raw answers. Needs only NVML:
// no cluster, no running agent.
#ifndef GPU_AGENT_AGENT_CLI_HEALTH_COMMAND_H_
#define GPU_AGENT_AGENT_CLI_HEALTH_COMMAND_H_

#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

// Prints the report to stdout in `output` ("json", "yaml", else a table).
// Exit 0 once the report is printed, whatever the GPUs' health (the report
// says it); 1 when NVML cannot be started.
int HealthCommand(const LoadedConfig& loaded, const std::string& output);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_HEALTH_COMMAND_H_
