// A GPU's multi-node NVLink fabric registration (GB200 NVL and the like):
// the cluster and clique the fabric manager put it in. gpu-feature-discovery
// labels a node's clique from it (nvidia.com/gpu.clique).
#ifndef GPU_AGENT_NVML_GPU_FABRIC_H_
#define GPU_AGENT_NVML_GPU_FABRIC_H_

#include <string>

#include "nvml/nvml_api.h"

namespace gpu_agent::nvml {

class NvmlLibrary;

struct FabricRecord {
  // Registration completed without error and a non-zero cluster UUID:
  // only then are the ids below set.
  bool attached = false;
  std::string cluster_uuid;  // "8-4-4-4-12" lower-case hex, as Go's uuid.String()
  unsigned clique_id = 0;
  // Set when NVML failed other than NOT_SUPPORTED (no fabric on this GPU,
  // or a driver without the functions, are simply "not attached").
  std::string error;
};

// nvmlDeviceGetGpuFabricInfoV (version 2) where the driver has it, else
// nvmlDeviceGetGpuFabricInfo.
FabricRecord ReadGpuFabric(const NvmlLibrary& lib, nvmlDevice_t dev);

// 16 bytes as a UUID's text form.
std::string FormatFabricUuid(const unsigned char (&bytes)[NVML_GPU_FABRIC_UUID_LEN]);

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_GPU_FABRIC_H_
