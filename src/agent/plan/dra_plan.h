// DRA's projection of the device model: each unit as the device a DRA
// driver publishes (dra/dra_device.h), so `run` and `gpu-agent dra slices`
// publish the same devices, and each has its entry in the node's CDI spec.
#ifndef GPU_AGENT_AGENT_PLAN_DRA_PLAN_H_
#define GPU_AGENT_AGENT_PLAN_DRA_PLAN_H_

#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/plan/device_model.h"
#include "dra/dra_device.h"
#include "nvml/inventory.h"

namespace gpu_agent {

// The devices, in the model's order: the units with a CDI entry
// (DeviceUnit::has_cdi_entry), so that every device published prepares.
std::vector<dra::DraDevice> DraDevicesOf(const DeviceModel& model,
                                         const nvml::Inventory& inventory);

// The pool's name: the node's name (nodeName), else this host's name.
std::string DraPoolName(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_DRA_PLAN_H_
