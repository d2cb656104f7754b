#include "nvml/gpu_handles.h"

#include <set>

#include "nvml/nvml_library.h"

namespace gpu_agent::nvml {

GpuHandles::GpuHandles(const NvmlLibrary& lib, const std::vector<std::string>& uuids) : lib_(lib) {
  for (const std::string& uuid : uuids) handles_[uuid] = nullptr;
  ResolveMissing();
}

nvmlReturn_t GpuHandles::ResolveMissing() {
  const NvmlFunctions& f = lib_.fn();
  unsigned count = 0;
  if (f.DeviceGetCount(&count) != NVML_SUCCESS) return NVML_SUCCESS;
  std::set<nvmlDevice_t> known;
  for (const auto& [uuid, dev] : handles_) {
    if (dev != nullptr) known.insert(dev);
  }
  nvmlReturn_t result = NVML_SUCCESS;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    const nvmlReturn_t r = f.DeviceGetHandleByIndex(i, &dev);
    if (r == NVML_ERROR_GPU_IS_LOST) result = r;
    // A GPU already resolved is not asked for its UUID again.
    if (r != NVML_SUCCESS || known.count(dev)) continue;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    const nvmlReturn_t u = f.DeviceGetUUID(dev, uuid, sizeof uuid);
    if (u == NVML_ERROR_GPU_IS_LOST) result = u;
    if (u != NVML_SUCCESS) continue;
    auto it = handles_.find(uuid);
    if (it != handles_.end() && it->second == nullptr) it->second = dev;
  }
  return result;
}

nvmlDevice_t GpuHandles::Find(const std::string& uuid, nvmlReturn_t* why) {
  auto it = handles_.find(uuid);
  if (it == handles_.end()) {
    *why = NVML_ERROR_NOT_FOUND;
    return nullptr;
  }
  if (it->second == nullptr) {
    const nvmlReturn_t r = ResolveMissing();
    if (it->second == nullptr) {
      *why = r == NVML_ERROR_GPU_IS_LOST ? r : NVML_ERROR_NOT_FOUND;
      return nullptr;
    }
  }
  *why = NVML_SUCCESS;
  return it->second;
}

}  // namespace gpu_agent::nvml
