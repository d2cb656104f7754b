// Loads NVIDIA's NVML with dlopen and resolves the symbols the agent uses.
// The driver library is never linked: the binary must start, and say what is
// missing, on a machine without a driver.
#ifndef GPU_AGENT_NVML_NVML_LIBRARY_H_
#define GPU_AGENT_NVML_NVML_LIBRARY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nvml/nvml_api.h"

namespace gpu_agent::nvml {

// The oldest NVIDIA driver branch gpu-agent runs on: the first whose NVML
// has every versioned function it calls (nvmlEventSetWait_v2 came last).
inline constexpr const char* kOldestDriverBranch = "R450";

// Resolved entry points. Required ones are never null after Open(); the
// optional ones (noted) are null when the driver is too old to export them.
struct NvmlFunctions {
  nvmlInit_v2_fn Init = nullptr;
  nvmlShutdown_fn Shutdown = nullptr;
  nvmlErrorString_fn ErrorString = nullptr;
  nvmlSystemGetDriverVersion_fn SystemGetDriverVersion = nullptr;
  nvmlSystemGetNVMLVersion_fn SystemGetNVMLVersion = nullptr;
  nvmlSystemGetCudaDriverVersion_fn SystemGetCudaDriverVersion = nullptr;
  nvmlDeviceGetCount_v2_fn DeviceGetCount = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn DeviceGetHandleByIndex = nullptr;
  nvmlDeviceGetHandleByUUID_fn DeviceGetHandleByUUID = nullptr;
  nvmlDeviceGetIndex_fn DeviceGetIndex = nullptr;
  nvmlDeviceGetName_fn DeviceGetName = nullptr;
  nvmlDeviceGetUUID_fn DeviceGetUUID = nullptr;
  nvmlDeviceGetMinorNumber_fn DeviceGetMinorNumber = nullptr;
  nvmlDeviceGetPciInfo_v3_fn DeviceGetPciInfo = nullptr;
  nvmlDeviceGetMemoryInfo_fn DeviceGetMemoryInfo = nullptr;
  // Optional: what shows a GPU was reset or repaired.
  nvmlDeviceGetFieldValues_fn DeviceGetFieldValues = nullptr;
  nvmlDeviceGetRemappedRows_fn DeviceGetRemappedRows = nullptr;
  nvmlDeviceGetRetiredPagesPendingStatus_fn DeviceGetRetiredPagesPendingStatus = nullptr;
  nvmlDeviceGetCudaComputeCapability_fn DeviceGetCudaComputeCapability = nullptr;
  nvmlDeviceGetTopologyCommonAncestor_fn DeviceGetTopologyCommonAncestor = nullptr;  // optional
  nvmlDeviceGetBrand_fn DeviceGetBrand = nullptr;                                    // optional
  nvmlDeviceGetArchitecture_fn DeviceGetArchitecture = nullptr;                      // optional
  nvmlDeviceGetNvLinkState_fn DeviceGetNvLinkState = nullptr;                        // optional
  nvmlDeviceGetNvLinkRemotePciInfo_v2_fn DeviceGetNvLinkRemotePciInfo = nullptr;     // optional
  nvmlDeviceGetMigMode_fn DeviceGetMigMode = nullptr;                                // optional
  nvmlDeviceGetMaxMigDeviceCount_fn DeviceGetMaxMigDeviceCount = nullptr;            // optional
  nvmlDeviceGetMigDeviceHandleByIndex_fn DeviceGetMigDeviceHandleByIndex = nullptr;  // optional
  nvmlDeviceGetGpuInstanceId_fn DeviceGetGpuInstanceId = nullptr;                    // optional
  nvmlDeviceGetComputeInstanceId_fn DeviceGetComputeInstanceId = nullptr;            // optional
  nvmlDeviceGetAttributes_v2_fn DeviceGetAttributes = nullptr;                       // optional
  // Optional: a MIG-enabled GPU's profiles, which name its MIG devices
  // without privilege; V (R510+) also gives NVML's own profile names.
  nvmlDeviceGetGpuInstanceProfileInfo_fn DeviceGetGpuInstanceProfileInfo = nullptr;
  nvmlDeviceGetGpuInstanceProfileInfoV_fn DeviceGetGpuInstanceProfileInfoV = nullptr;
  // Optional: a GPU's multi-node NVLink fabric registration (clique).
  nvmlDeviceGetGpuFabricInfo_fn DeviceGetGpuFabricInfo = nullptr;
  nvmlDeviceGetGpuFabricInfoV_fn DeviceGetGpuFabricInfoV = nullptr;
  // Optional: the polled health checks (health_checks.h); each one missing
  // turns its checks off.
  nvmlDeviceGetTemperature_fn DeviceGetTemperature = nullptr;
  nvmlDeviceGetTemperatureThreshold_fn DeviceGetTemperatureThreshold = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons (R535+), else the older
  // nvmlDeviceGetCurrentClocksThrottleReasons of the same signature.
  nvmlDeviceGetCurrentClocksEventReasons_fn DeviceGetCurrentClocksEventReasons = nullptr;
  nvmlDeviceGetEccMode_fn DeviceGetEccMode = nullptr;
  nvmlDeviceGetTotalEccErrors_fn DeviceGetTotalEccErrors = nullptr;
  nvmlDeviceGetUintValue_fn DeviceGetCurrPcieLinkWidth = nullptr;
  nvmlDeviceGetUintValue_fn DeviceGetCurrPcieLinkGeneration = nullptr;
  nvmlDeviceGetUintValue_fn DeviceGetMaxPcieLinkWidth = nullptr;
  nvmlDeviceGetUintValue_fn DeviceGetMaxPcieLinkGeneration = nullptr;
  nvmlDeviceGetUintValue_fn DeviceGetPcieReplayCounter = nullptr;
  nvmlDeviceGetSupportedEventTypes_fn DeviceGetSupportedEventTypes = nullptr;  // optional
  nvmlDeviceRegisterEvents_fn DeviceRegisterEvents = nullptr;                  // optional
  nvmlEventSetCreate_fn EventSetCreate = nullptr;                              // optional
  nvmlEventSetWait_v2_fn EventSetWait = nullptr;                               // optional
  nvmlEventSetFree_fn EventSetFree = nullptr;                                  // optional
};

// The folders the driver's libraries are looked for in, as the driver root
// sees them, in order: the distributions' library folders, then those where
// the root's own loader cache (`root_here`/etc/ld.so.cache) has NVML or
// libcuda (a driver container's /usr/local/nvidia/lib64, say).
std::vector<std::string> DriverLibraryFolders(std::string_view root_here);

// The folders searched for libnvidia-ml.so.1 under a driver root, in order:
// DriverLibraryFolders under that root.
std::vector<std::string> LibrarySearchFolders(std::string_view driver_root);

// One loaded libnvidia-ml. Thread-safety: NVML itself is thread-safe after
// init; this object is immutable after Open() and Init().
class NvmlLibrary {
 public:
  // Loads libnvidia-ml.so.1. With driver root "/" the dynamic loader's own
  // search (LD_LIBRARY_PATH, ld.so.cache) goes first, then the usual driver
  // folders; with another root, that root's folders go first. The error lists
  // every place tried and how to point the agent elsewhere.
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open(std::string_view driver_root);

  // An NVML already in this process, given as its function table (tests'
  // in-process fake). `name` stands where a loaded library's path would.
  // Unlike Open(), nothing checks which functions are null: the caller
  // fills those its code paths call.
  static std::unique_ptr<NvmlLibrary> FromFunctions(const NvmlFunctions& fn, std::string name);

  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // nvmlInit_v2. Errors keep NVML's own text and code.
  absl::Status Init();

  const NvmlFunctions& fn() const { return fn_; }
  // The file dlopen loaded.
  const std::string& path() const { return path_; }

  // NVML's text for a return code, with the code: "GPU is lost (15)".
  std::string ErrorText(nvmlReturn_t r) const;
  // OK on NVML_SUCCESS; otherwise an error "<what>: <NVML text>" whose code
  // reflects the failure (kNotFound, kUnavailable for a lost GPU, ...).
  absl::Status Check(nvmlReturn_t r, std::string_view what) const;

 private:
  NvmlLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  absl::Status Resolve();

  void* handle_;  // null for FromFunctions()
  std::string path_;
  NvmlFunctions fn_;
  bool initialized_ = false;
};

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_NVML_LIBRARY_H_
