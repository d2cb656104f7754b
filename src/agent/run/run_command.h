// `gpu-agent run`: the agent itself. Reads the node's config, starts NVML
// (waiting for the driver if asked), discovers the GPUs and runs the mode.
#ifndef GPU_AGENT_AGENT_RUN_RUN_COMMAND_H_
#define GPU_AGENT_AGENT_RUN_RUN_COMMAND_H_

#include "agent/config/config_loader.h"

namespace gpu_agent {

// Returns the process exit code (exit_code.h) when the agent stops.
int RunCommand(const ConfigRequest& request, LoadedConfig loaded);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_RUN_COMMAND_H_
