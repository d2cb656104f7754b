// What the device-plugin server advertises: plain records handed over by the
// agent. Nothing here knows NVML.
#ifndef GPU_AGENT_DEVICEPLUGIN_DEVICE_H_
#define GPU_AGENT_DEVICEPLUGIN_DEVICE_H_

#include <string>
#include <vector>

#include "base/device_key.h"

namespace gpu_agent::deviceplugin {

// One schedulable unit: a whole GPU, a MIG device, or one time-sliced
// replica of either.
struct PluginDevice {
  std::string id;      // advertised ID: "<unit id>" or "<unit id>::<n>"
  std::string gpu_id;  // the unit's ID for the runtime (UUID or index, per deviceIDStrategy)
  // The unit: its physical (parent) GPU's UUID and, for a MIG device, its
  // GPU and compute instance. Health reports name units by such keys.
  DeviceKey key;
  int physical = 0;    // the shareable unit: index into ResourceSpec::link_score
  int numa_node = -1;  // -1: not reported
  // e.g. "/dev/nvidia3", "/dev/nvidia-caps/nvidia-cap21" (without the dev root)
  std::vector<std::string> device_nodes;
  // As the health watcher last reported it (see health/health_ledger.h); as NVML
  // answered at discovery until it reports.
  bool healthy = true;
};

// Everything one resource (one socket, one Register) serves.
struct ResourceSpec {
  std::string resource_name;  // e.g. nvidia.com/gpu
  std::string endpoint;       // socket file name in the kubelet's folder
  std::vector<PluginDevice> devices;
  bool replicated = false;  // time-sliced replicas
  // Replicas only: suggest replicas on the fullest unit first (pack) rather
  // than the emptiest (spread).
  bool pack_replicas = false;
  // Higher is better connected; square over physical GPUs, computed once at
  // discovery so GetPreferredAllocation never asks NVML.
  std::vector<std::vector<int>> link_score;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_DEVICE_H_
