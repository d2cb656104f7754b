// Time-slicing (sharing.timeSlicing) in the device model: which units are
// advertised as replicas, how many, and under which resource. Part of
// BuildDeviceModel; the device plugin's projection (resource_plan.h) reads
// what it records and reports its errors and warnings.
#ifndef GPU_AGENT_AGENT_PLAN_TIME_SLICING_H_
#define GPU_AGENT_AGENT_PLAN_TIME_SLICING_H_

#include "agent/config/config.h"
#include "agent/plan/device_model.h"
#include "nvml/inventory.h"

namespace gpu_agent {

// Sets each unit's replicas and the model's time_sliced, sharing_error and
// sharing_warnings, from the units' resources (set before).
void ApplyTimeSlicing(const Config& config, const nvml::Inventory& inventory, DeviceModel* model);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_TIME_SLICING_H_
