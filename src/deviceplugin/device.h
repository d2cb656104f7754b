// What the device-plugin server advertises: plain records handed over by the
// agent. Nothing here knows NVML.
#ifndef GPU_AGENT_DEVICEPLUGIN_DEVICE_H_
#define GPU_AGENT_DEVICEPLUGIN_DEVICE_H_

#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace gpu_agent::deviceplugin {

// One schedulable unit: a whole GPU, a MIG device, or one time-sliced
// replica of either.
struct PluginDevice {
  std::string id;             // advertised ID: "<unit id>" or "<unit id>::<n>"
  std::string gpu_id;         // the unit's ID for the runtime (UUID or index, per deviceIDStrategy)
  std::string gpu_uuid;       // the physical (parent) GPU's UUID; health events name it
  int gpu_instance = -1;      // MIG GPU instance id; -1: a whole GPU
  int compute_instance = -1;  // MIG compute instance id; -1: a whole GPU
  int physical = 0;           // the shareable unit: index into ResourceSpec::link_score
  int numa_node = -1;         // -1: not reported
  // e.g. "/dev/nvidia3", "/dev/nvidia-caps/nvidia-cap21" (without the dev root)
  std::vector<std::string> device_nodes;
  bool healthy = true;
};

// What a health change is about: a whole GPU (every device on it, MIG
// devices included), one MIG GPU instance, or one compute instance in it.
struct HealthTarget {
  std::string gpu_uuid;
  int gpu_instance = -1;      // -1: the whole GPU
  int compute_instance = -1;  // -1: the whole GPU instance

  bool Covers(const PluginDevice& d) const {
    if (d.gpu_uuid != gpu_uuid) return false;
    if (gpu_instance < 0) return true;
    if (d.gpu_instance != gpu_instance) return false;
    return compute_instance < 0 || d.compute_instance == compute_instance;
  }
  auto Key() const { return std::tie(gpu_uuid, gpu_instance, compute_instance); }
  bool operator<(const HealthTarget& o) const { return Key() < o.Key(); }
};

// The health targets that are currently out. A device is healthy when none
// covers it, so a GPU-wide recovery leaves an instance that is still out
// alone, and the other way round.
class HealthLedger {
 public:
  // Returns true when the set changed.
  bool Set(const HealthTarget& target, bool healthy) {
    return healthy ? out_.erase(target) > 0 : out_.insert(target).second;
  }
  bool Healthy(const PluginDevice& d) const {
    for (const HealthTarget& t : out_) {
      if (t.Covers(d)) return false;
    }
    return true;
  }

 private:
  std::set<HealthTarget> out_;
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
