// This node's CDI spec, the CDI projection of the device model: each unit
// under the names Allocate and DRA's prepare give it (a GPU by UUID and
// index, a MIG device by UUID and "<gpu>:<mig>"), with its device nodes;
// the rest is cdi/generator.h's.
#ifndef GPU_AGENT_AGENT_PLAN_CDI_PLAN_H_
#define GPU_AGENT_AGENT_PLAN_CDI_PLAN_H_

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/plan/device_model.h"
#include "cdi/generator.h"
#include "nvml/inventory.h"

namespace gpu_agent {

// Whether any cdi-* device-list strategy is on (then Allocate names CDI
// devices and plugin mode writes the spec).
bool CdiStrategyOn(const Config& config);

// The generator's input: every unit of the model. Errors name the MIG
// device and the file when its capability nodes are unknown.
absl::StatusOr<cdi::GeneratorInput> CdiInputFrom(const Config& config,
                                                 const nvml::Inventory& inventory,
                                                 const DeviceModel& model);

// CdiInputFrom, then cdi::Generate.
absl::StatusOr<cdi::Generated> GenerateCdiSpec(const Config& config,
                                               const nvml::Inventory& inventory,
                                               const DeviceModel& model);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_CDI_PLAN_H_
