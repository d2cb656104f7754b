// The NVML handles of the GPUs the health watcher watches, found by index
// (nvmlDeviceGetHandleByIndex_v2, then the handle's UUID) and kept. Never
// looked up again by UUID: NVIDIA's nvml.h has nvmlDeviceGetHandleByUUID
// answer GPU_IS_LOST when ANY GPU has fallen off the bus, so a lookup per
// probe would make every GPU look lost once one is. A handle stays valid
// while NVML is initialised, across a GPU reset too; queries on it answer
// for that GPU alone.
//
// Thread-compatible: the health watcher's thread alone uses it after
// construction.
#ifndef GPU_AGENT_NVML_GPU_HANDLES_H_
#define GPU_AGENT_NVML_GPU_HANDLES_H_

#include <map>
#include <string>
#include <vector>

#include "nvml/nvml_api.h"

namespace gpu_agent::nvml {

class NvmlLibrary;

class GpuHandles {
 public:
  // Resolves every GPU of `uuids` NVML enumerates now. REQUIRES: `lib`
  // outlives this object.
  GpuHandles(const NvmlLibrary& lib, const std::vector<std::string>& uuids);

  // The handle of `uuid`, or null with `*why` saying why there is none:
  // GPU_IS_LOST while an index NVML enumerates answers that (a GPU off the
  // bus since before it was found, which can only be this one or another
  // unresolved one), NOT_FOUND otherwise. A GPU not resolved yet is looked
  // for again on each call, so one lost at start is found once it is back.
  nvmlDevice_t Find(const std::string& uuid, nvmlReturn_t* why);

 private:
  // Walks NVML's indexes for the GPUs still unresolved; returns GPU_IS_LOST
  // when an index answered it, NVML_SUCCESS otherwise.
  nvmlReturn_t ResolveMissing();

  const NvmlLibrary& lib_;
  std::map<std::string, nvmlDevice_t> handles_;  // by UUID; null: not resolved yet
};

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_GPU_HANDLES_H_
