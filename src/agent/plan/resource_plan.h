// The resource plan: the device plugin's projection of the device model
// (agent/plan/device_model.h, built once per generation), the extended
// resources this node advertises (the units' resources, split by the
// model's time-slicing replicas), each with its device IDs, NUMA nodes,
// device nodes, link scores and socket name, plus the Allocate options.
// Plugin mode serves it; static mode and `capacity set --discover` count
// it. Pure: no I/O but checking which device nodes exist.
#ifndef GPU_AGENT_AGENT_PLAN_RESOURCE_PLAN_H_
#define GPU_AGENT_AGENT_PLAN_RESOURCE_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/plan/device_model.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/device.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct ResourcePlan {
  std::vector<deviceplugin::ResourceSpec> resources;  // one socket each
  deviceplugin::AllocateOptions allocate;
  // Things an operator should hear about that do not stop the agent:
  // sharing entries for resources this node does not have.
  std::vector<std::string> warnings;
};

// What plugin mode serves of the model's units. kInvalidArgument for a
// config the node cannot satisfy (migStrategy single on a mix of MIG and
// whole GPUs, a sharing entry naming no device; the message names the
// setting and the device); a MIG device's capability nodes unknown (the
// mig-minors file missing or not listing it) is an error only when device
// specs are to be passed (flags.plugin.passDeviceSpecs).
absl::StatusOr<ResourcePlan> PlanResources(const Config& config, const nvml::Inventory& inventory,
                                           const DeviceModel& model);

// The resources and counts plugin mode would advertise, for static mode and
// `capacity set --discover`: the same plan, except that device nodes are not
// passed there, so no capability node is needed whatever passDeviceSpecs says.
absl::StatusOr<ResourcePlan> PlanAdvertised(const Config& config, const nvml::Inventory& inventory,
                                            const DeviceModel& model);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_RESOURCE_PLAN_H_
