// `gpu-agent capacity set|get|remove`: patch a Node's extended-resource
// capacity by hand, through the API server or kubectl proxy.
#ifndef GPU_AGENT_AGENT_CLI_CAPACITY_COMMAND_H_
#define GPU_AGENT_AGENT_CLI_CAPACITY_COMMAND_H_

#include <optional>
#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

struct CapacityRequest {
  std::string verb;  // set | get | remove
  std::string node;  // empty: nodeName from config / NODE_NAME
  // The resource to read or patch; empty: resourceName. Separate from it, so
  // `--discover` can count a MIG profile while whole GPUs keep their name.
  std::string resource;
  std::optional<std::string> count;  // set: the raw --count text
  bool discover = false;             // set: count the GPUs NVML sees
  bool dry_run = false;
  std::string output = "text";  // get: text | json
};

int CapacityCommand(const LoadedConfig& loaded, const CapacityRequest& request);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_CAPACITY_COMMAND_H_
