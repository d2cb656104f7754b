// Plugin mode: serves the kubelet device-plugin API for the node's GPUs until
// SIGTERM/SIGINT; SIGHUP reloads the config, re-discovers and re-registers.
#ifndef GPU_AGENT_AGENT_PLUGIN_MODE_H_
#define GPU_AGENT_AGENT_PLUGIN_MODE_H_

#include <memory>

#include "agent/config_loader.h"
#include "agent/node_config.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

// `lib` may be null (NVML failed and failOnInitError is false): the plugin
// then serves no devices. `node_config`: null, or the per-node config, which
// outlives the call; a light watch of the Node feeds it its label. Returns
// the exit code.
int RunPluginMode(const ConfigRequest& request, LoadedConfig loaded,
                  std::shared_ptr<const nvml::NvmlLibrary> lib, nvml::Inventory inventory,
                  NodeConfigSelector* node_config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLUGIN_MODE_H_
