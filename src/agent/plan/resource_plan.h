// The resource plan: from the NVML inventory, the config and the GPUs chosen
// (device selection, done once per generation: agent/plan/generation.h), the
// extended resources this node advertises (per flags.migStrategy and
// time-slicing), each with its device IDs, NUMA nodes, device nodes,
// link scores and socket name, plus the Allocate options. Plugin mode serves
// it; static mode and `capacity set --discover` count it. Pure: no I/O but
// checking which device nodes exist and reading the MIG capability minors.
#ifndef GPU_AGENT_AGENT_PLAN_RESOURCE_PLAN_H_
#define GPU_AGENT_AGENT_PLAN_RESOURCE_PLAN_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/device_selection.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/device.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct ResourcePlan {
  std::vector<deviceplugin::ResourceSpec> resources;  // one socket each
  deviceplugin::AllocateOptions allocate;
  std::vector<std::string> gpu_uuids;         // physical GPUs to watch
  std::set<std::string> initially_unhealthy;  // GPUs NVML called lost at discovery
  // Things an operator should hear about that do not stop the agent:
  // selectors matching nothing, MIG devices that cannot be named, sharing
  // entries for resources this node does not have.
  std::vector<std::string> warnings;
};

// What plugin mode serves, of the GPUs `choice` holds. kInvalidArgument for a config the inventory
// cannot satisfy (the message names the setting and the device); a missing
// or malformed mig-minors file is an error only when device specs for MIG
// devices are to be passed (flags.plugin.passDeviceSpecs).
absl::StatusOr<ResourcePlan> PlanResources(const Config& config, const nvml::Inventory& inventory,
                                           const GpuChoice& choice);

// The resources and counts plugin mode would advertise, for static mode and
// `capacity set --discover`: the same plan, except that device nodes are not
// passed there, so no mig-minors file is read whatever passDeviceSpecs says.
absl::StatusOr<ResourcePlan> PlanAdvertised(const Config& config, const nvml::Inventory& inventory,
                                            const GpuChoice& choice);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_RESOURCE_PLAN_H_
