// What the device-plugin server advertises: plain records handed over by the
// agent. Nothing here knows NVML.
#ifndef GPU_AGENT_DEVICEPLUGIN_DEVICE_H_
#define GPU_AGENT_DEVICEPLUGIN_DEVICE_H_

#include <string>
#include <vector>

namespace gpu_agent::deviceplugin {

// One schedulable unit: a whole GPU, or one time-sliced replica of it.
struct PluginDevice {
  std::string id;        // advertised ID: "<gpu id>" or "<gpu id>::<n>"
  std::string gpu_id;    // the GPU's ID for the runtime (UUID or index, per deviceIDStrategy)
  std::string gpu_uuid;  // the physical GPU's UUID; health is tracked per physical GPU
  int physical = 0;      // index into ResourceSpec::link_score
  int numa_node = -1;    // -1: not reported
  std::vector<std::string> device_nodes;  // e.g. "/dev/nvidia3" (without the dev root)
  bool healthy = true;
};

// Everything one resource (one socket, one Register) serves.
struct ResourceSpec {
  std::string resource_name;  // e.g. nvidia.com/gpu
  std::string endpoint;       // socket file name in the kubelet's folder
  std::vector<PluginDevice> devices;
  bool replicated = false;  // time-sliced replicas
  // Higher is better connected; square over physical GPUs, computed once at
  // discovery so GetPreferredAllocation never asks NVML.
  std::vector<std::vector<int>> link_score;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_DEVICE_H_
