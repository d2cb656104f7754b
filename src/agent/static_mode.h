// Static mode: keeps nvidia.com/gpu (healthy GPUs x replicas) in this Node's
// status.capacity and status.allocatable until SIGTERM/SIGINT; SIGHUP reloads.
#ifndef GPU_AGENT_AGENT_STATIC_MODE_H_
#define GPU_AGENT_AGENT_STATIC_MODE_H_

#include <memory>

#include "agent/config_loader.h"
#include "agent/node_config.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

// `node_config`: null, or the per-node config (read from this mode's Node
// watch), which outlives the call.
int RunStaticMode(const ConfigRequest& request, LoadedConfig loaded,
                  std::shared_ptr<const nvml::NvmlLibrary> lib, nvml::Inventory inventory,
                  NodeConfigSelector* node_config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_STATIC_MODE_H_
