// This node's CDI spec as the config and the NVML inventory call for it:
// which GPUs and MIG devices it offers, under the names Allocate gives them
// (each GPU by UUID and index, each MIG device by UUID and "<gpu>:<mig>"
// when MIG devices are served), with their device nodes; the rest is
// cdi/generator.h's.
#ifndef GPU_AGENT_AGENT_PLAN_CDI_PLAN_H_
#define GPU_AGENT_AGENT_PLAN_CDI_PLAN_H_

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/device_selection.h"
#include "cdi/generator.h"
#include "nvml/inventory.h"

namespace gpu_agent {

// Whether any cdi-* device-list strategy is on (then Allocate names CDI
// devices and plugin mode writes the spec).
bool CdiStrategyOn(const Config& config);

// The generator's input: the GPUs `choice` holds. GPUs without a
// device minor are left out with a note in `*notes`. Errors name the GPU,
// MIG device or file (the mig-minors file for MIG capability nodes).
absl::StatusOr<cdi::GeneratorInput> CdiInputFrom(const Config& config,
                                                 const nvml::Inventory& inventory,
                                                 const GpuChoice& choice,
                                                 std::vector<std::string>* notes);

// CdiInputFrom, then cdi::Generate; the notes of both in the result.
absl::StatusOr<cdi::Generated> GenerateCdiSpec(const Config& config,
                                               const nvml::Inventory& inventory,
                                               const GpuChoice& choice);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_CDI_PLAN_H_
