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
  std::vector<deviceplugin::ResourceSpec> resources;  // one socket each
  deviceplugin::AllocateOptions allocate;
  std::vector<std::string> gpu_uuids;         // physical GPUs to watch
  std::set<std::string> initially_unhealthy;  // GPUs whose discovery failed
  // Things an operator should hear about that do not stop the agent:
  // selectors matching nothing, MIG devices that cannot be named, sharing
  // entries for resources this node does not have.
  std::vector<std::string> warnings;
};

// Higher is better: NVLinks dominate, then PCIe distance.
int LinkScore(const nvml::GpuLink& link);

// Turns the inventory into resources per flags.migStrategy, devices:
// selection and time-slicing. kInvalidArgument for a config the inventory
// cannot satisfy (the message names the setting and the device); a missing
// or malformed mig-minors file is an error only when device specs for MIG
// devices are to be passed.
absl::StatusOr<PluginPlan> PlanPlugin(const Config& config, const nvml::Inventory& inventory);

// The resources and counts plugin mode would advertise, for static mode and
// `capacity set --discover`: device nodes do not matter there, so no
// mig-minors file is read.
absl::StatusOr<PluginPlan> PlanAdvertised(const Config& config, const nvml::Inventory& inventory);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLUGIN_PLAN_H_
