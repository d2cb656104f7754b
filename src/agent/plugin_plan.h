// Turns the NVML inventory and the config into what plugin mode serves:
// resources, device IDs (per deviceIDStrategy and time-slicing), NUMA
// topology, device nodes, the cached interconnect scores, and the Allocate
// options. Pure: no I/O except checking which device nodes exist.
#ifndef GPU_AGENT_AGENT_PLUGIN_PLAN_H_
#define GPU_AGENT_AGENT_PLUGIN_PLAN_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/device.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct PluginPlan {
  std::vector<deviceplugin::ResourceSpec> resources;
  deviceplugin::AllocateOptions allocate;
  std::vector<std::string> gpu_uuids;         // GPUs to watch
  std::set<std::string> initially_unhealthy;  // GPUs whose discovery failed
};

// Higher is better: NVLinks dominate, then PCIe distance.
int LinkScore(const nvml::GpuLink& link);

// kInvalidArgument for a config the inventory cannot satisfy.
absl::StatusOr<PluginPlan> PlanPlugin(const Config& config, const nvml::Inventory& inventory);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLUGIN_PLAN_H_
