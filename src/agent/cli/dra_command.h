// `gpu-agent dra slices`: the ResourceSlices DRA mode would publish for this
// node's GPUs, as JSON (a List) or YAML (one document a slice). Offline: it
// reads NVML, never the API server (no owner reference, generation 1).
#ifndef GPU_AGENT_AGENT_CLI_DRA_COMMAND_H_
#define GPU_AGENT_AGENT_CLI_DRA_COMMAND_H_

#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

// `output`: "yaml" (default) or "json". Returns the exit code.
int DraSlicesCommand(const LoadedConfig& loaded, const std::string& output);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_DRA_COMMAND_H_
