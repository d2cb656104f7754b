// Builds this node's CDI spec from what the agent knows: the NVML
// inventory, the config (kind, roots, device selection, MIG strategy,
// nvidia-ctk) and the driver's files and device nodes. One CDI device per
// ID Allocate can name (each GPU by UUID and index, each MIG device by UUID
// and "<gpu>:<mig>" when MIG devices are served) plus "all".
//
// What goes into the container edits follows NVIDIA's generator
// (nvidia-container-toolkit pkg/nvcdi: full-gpu-nvml.go, mig-device-nvml.go,
// driver-nvml.go, management.go) and the CDI specification; see
// driver_files.h for the driver's files.
#ifndef GPU_AGENT_AGENT_CDI_GENERATOR_H_
#define GPU_AGENT_AGENT_CDI_GENERATOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config.h"
#include "deviceplugin/cdi_spec.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct CdiGenerated {
  deviceplugin::cdi::Spec spec;
  // Things an operator should hear about: GPUs left out (no device minor),
  // hooks not used because nvidia-ctk is not where configured.
  std::vector<std::string> notes;
};

// Host paths come from flags.nvidiaDriverRoot / nvidiaDevRoot; existence is
// checked where this process sees them (DriverRootHere / DevRootHere).
// Errors (kNotFound, kFailedPrecondition, kInvalidArgument) name the file,
// GPU or setting. kNotFound also when no GPU is exposed: a spec needs one.
absl::StatusOr<CdiGenerated> GenerateCdiSpec(const Config& config,
                                             const nvml::Inventory& inventory);

// Whether any cdi-* device-list strategy is on (then Allocate names CDI
// devices and plugin mode writes the spec).
bool CdiStrategyOn(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CDI_GENERATOR_H_
