// `gpu-agent labels [-o text|json|yaml]`: print the GPU labels this node's
// GPUs call for; `gpu-agent labels apply|remove --node N [--dry-run]`: put
// them on a Node, or take the agent's own off, by hand, through the API
// server or kubectl proxy (the connection flags of `capacity`).
#ifndef GPU_AGENT_AGENT_CLI_LABELS_COMMAND_H_
#define GPU_AGENT_AGENT_CLI_LABELS_COMMAND_H_

#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

struct LabelsRequest {
  std::string verb;  // empty: print; apply | remove
  std::string node;  // empty: nodeName from config / NODE_NAME
  bool dry_run = false;
  std::string output = "text";  // print: text (key=value lines) | json | yaml
};

int LabelsCommand(const LoadedConfig& loaded, const LabelsRequest& request);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_LABELS_COMMAND_H_
