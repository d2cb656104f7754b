#include "nvml/gpu_fabric.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "nvml/nvml_library.h"

namespace gpu_agent::nvml {
namespace {

template <typename Info>
FabricRecord FromInfo(const NvmlLibrary& lib, nvmlReturn_t r, const Info& info, const char* what) {
  FabricRecord out;
  if (r == NVML_ERROR_NOT_SUPPORTED) return out;
  if (r != NVML_SUCCESS) {
    out.error = std::string(lib.Check(r, what).message());
    return out;
  }
  // As go-nvlib's IsFabricAttached: registration completed, no error, and
  // a cluster UUID that is not all zeros.
  const bool zero = std::all_of(std::begin(info.clusterUuid), std::end(info.clusterUuid),
                                [](unsigned char c) { return c == 0; });
  if (info.state != NVML_GPU_FABRIC_STATE_COMPLETED || info.status != NVML_SUCCESS || zero) {
    return out;
  }
  out.attached = true;
  out.cluster_uuid = FormatFabricUuid(info.clusterUuid);
  out.clique_id = info.cliqueId;
  return out;
}

}  // namespace

std::string FormatFabricUuid(const unsigned char (&bytes)[NVML_GPU_FABRIC_UUID_LEN]) {
  std::string out;
  for (size_t i = 0; i < NVML_GPU_FABRIC_UUID_LEN; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    out += hex;
  }
  return out;
}

FabricRecord ReadGpuFabric(const NvmlLibrary& lib, nvmlDevice_t dev) {
  const NvmlFunctions& f = lib.fn();
  if (f.DeviceGetGpuFabricInfoV) {
    nvmlGpuFabricInfoV_t info;
    std::memset(&info, 0, sizeof info);
    info.version = nvmlGpuFabricInfo_v2;
    const nvmlReturn_t r = f.DeviceGetGpuFabricInfoV(dev, &info);
    // A driver that knows only a newer version says so; the v1 call still
    // answers there.
    if (r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH || !f.DeviceGetGpuFabricInfo) {
      return FromInfo(lib, r, info, "nvmlDeviceGetGpuFabricInfoV");
    }
  }
  if (f.DeviceGetGpuFabricInfo) {
    nvmlGpuFabricInfo_t info;
    std::memset(&info, 0, sizeof info);
    return FromInfo(lib, f.DeviceGetGpuFabricInfo(dev, &info), info, "nvmlDeviceGetGpuFabricInfo");
  }
  return {};
}

}  // namespace gpu_agent::nvml
