#include "nvml/nvml_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <initializer_list>

#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"
#include "nvml/ld_cache.h"

namespace gpu_agent::nvml {
namespace {

constexpr const char* kLibraryName = "libnvidia-ml.so.1";

absl::StatusCode CodeFor(nvmlReturn_t r) {
  switch (r) {
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return absl::StatusCode::kUnimplemented;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case NVML_ERROR_NO_PERMISSION:
      return absl::StatusCode::kPermissionDenied;
    case NVML_ERROR_INVALID_ARGUMENT:
      return absl::StatusCode::kInvalidArgument;
    case NVML_ERROR_TIMEOUT:
      return absl::StatusCode::kDeadlineExceeded;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_NOT_READY:
    case NVML_ERROR_IN_USE:
      return absl::StatusCode::kUnavailable;
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_RESET_REQUIRED:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

std::vector<std::string> DriverLibraryFolders(std::string_view root_here) {
  std::vector<std::string> folders = {"/usr/lib64",
                                      "/usr/lib/x86_64-linux-gnu",
                                      "/usr/lib/aarch64-linux-gnu",
                                      "/lib64",
                                      "/lib/x86_64-linux-gnu",
                                      "/lib/aarch64-linux-gnu",
                                      "/usr/lib",
                                      "/lib"};
  const std::string root = root_here.empty() ? "/" : std::string(root_here);
  for (const LdCacheEntry& e : ReadLdCache(JoinRoot(root, "/etc/ld.so.cache"))) {
    if (!e.soname.starts_with("libnvidia-ml.so") && !e.soname.starts_with("libcuda.so")) continue;
    const size_t slash = e.path.rfind('/');
    if (slash == std::string::npos || slash == 0 || e.path[0] != '/') continue;
    std::string folder = e.path.substr(0, slash);
    if (std::find(folders.begin(), folders.end(), folder) == folders.end()) {
      folders.push_back(std::move(folder));
    }
  }
  return folders;
}

std::vector<std::string> LibrarySearchFolders(std::string_view driver_root) {
  std::vector<std::string> folders;
  for (const std::string& f : DriverLibraryFolders(driver_root)) {
    folders.push_back(JoinRoot(driver_root, f));
  }
  return folders;
}

absl::StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(std::string_view driver_root) {
  std::vector<std::string> candidates;
  const bool host_root = driver_root.empty() || driver_root == "/";
  if (host_root) candidates.push_back(kLibraryName);  // the loader's own search
  for (const std::string& folder : LibrarySearchFolders(host_root ? "" : driver_root)) {
    candidates.push_back(StrCat(folder, "/", kLibraryName));
  }
  if (!host_root) candidates.push_back(kLibraryName);

  std::vector<std::string> tried;
  int unloadable = 0;  // found, but dlopen refused it
  for (const std::string& candidate : candidates) {
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = ::dlerror();
      const std::string where = candidate == kLibraryName
                                    ? "the dynamic loader's path (LD_LIBRARY_PATH, ld.so.cache)"
                                    : candidate;
      // The library itself absent is the common case; keep every other
      // reason (a dependency missing, the wrong ELF class), which is what
      // an operator needs: "libdl.so.2: cannot open shared object file"
      // says the driver was found, not that it is missing.
      std::string reason = err ? err : "unknown error";
      if (reason.starts_with(StrCat(candidate, ": cannot open shared object file"))) {
        tried.push_back(where);
      } else {
        tried.push_back(StrCat(where, " (", reason, ")"));
        ++unloadable;
      }
      continue;
    }
    std::string path = candidate;
    if (candidate == kLibraryName) {
      // Report the file the loader picked.
      Dl_info info{};
      void* sym = ::dlsym(handle, "nvmlInit_v2");
      if (sym != nullptr && ::dladdr(sym, &info) != 0 && info.dli_fname != nullptr) {
        path = info.dli_fname;
      }
    }
    std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary(handle, path));
    if (absl::Status s = lib->Resolve(); !s.ok()) return s;
    return lib;
  }
  return absl::NotFoundError(StrCat(
      "NVML library ", kLibraryName,
      unloadable > 0 ? " found but not loadable (the reasons in brackets); looked in: "
                     : " not found; looked in: ",
      StrJoin(tried, ", "),
      ". Is the NVIDIA driver installed? If it lives under another root (for example the GPU "
      "operator's /run/nvidia/driver), set flags.nvidiaDriverRoot, --nvidia-driver-root or "
      "NVIDIA_DRIVER_ROOT; in a container that mounts the host's driver root elsewhere (say "
      "/driver-root), also set CONTAINER_DRIVER_ROOT to that path; or add the library's folder "
      "to LD_LIBRARY_PATH"));
}

std::unique_ptr<NvmlLibrary> NvmlLibrary::FromFunctions(const NvmlFunctions& fn, std::string name) {
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary(nullptr, std::move(name)));
  lib->fn_ = fn;
  return lib;
}

absl::Status NvmlLibrary::Resolve() {
  std::vector<std::string> missing;
  auto resolve = [&](auto& slot, std::initializer_list<const char*> names, bool required) {
    for (const char* name : names) {
      if (void* sym = ::dlsym(handle_, name)) {
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(sym);
        return;
      }
    }
    if (required) missing.push_back(*names.begin());
  };
  // Versioned names only where NVIDIA versioned the function: the
  // unversioned ones of PciInfo, NvLinkRemotePciInfo and EventSetWait fill
  // older struct layouts. Every name required here exists in R450, the
  // oldest driver branch supported (the first with nvmlEventSetWait_v2,
  // which MIG-scoped health events need); kOldestDriver names it.
  resolve(fn_.Init, {"nvmlInit_v2"}, true);
  resolve(fn_.Shutdown, {"nvmlShutdown"}, true);
  resolve(fn_.ErrorString, {"nvmlErrorString"}, true);
  resolve(fn_.SystemGetDriverVersion, {"nvmlSystemGetDriverVersion"}, true);
  resolve(fn_.SystemGetNVMLVersion, {"nvmlSystemGetNVMLVersion"}, false);
  // The unversioned one first: _v2 loads libcuda, which a container given
  // only the "utility" capability does not have.
  resolve(fn_.SystemGetCudaDriverVersion,
          {"nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2"}, false);
  resolve(fn_.DeviceGetCount, {"nvmlDeviceGetCount_v2"}, true);
  resolve(fn_.DeviceGetHandleByIndex, {"nvmlDeviceGetHandleByIndex_v2"}, true);
  resolve(fn_.DeviceGetHandleByUUID, {"nvmlDeviceGetHandleByUUID"}, true);
  resolve(fn_.DeviceGetIndex, {"nvmlDeviceGetIndex"}, false);
  resolve(fn_.DeviceGetName, {"nvmlDeviceGetName"}, true);
  resolve(fn_.DeviceGetUUID, {"nvmlDeviceGetUUID"}, true);
  resolve(fn_.DeviceGetMinorNumber, {"nvmlDeviceGetMinorNumber"}, true);
  resolve(fn_.DeviceGetPciInfo, {"nvmlDeviceGetPciInfo_v3"}, true);
  resolve(fn_.DeviceGetMemoryInfo, {"nvmlDeviceGetMemoryInfo"}, true);
  resolve(fn_.DeviceGetCudaComputeCapability, {"nvmlDeviceGetCudaComputeCapability"}, true);
  resolve(fn_.DeviceGetTopologyCommonAncestor, {"nvmlDeviceGetTopologyCommonAncestor"}, false);
  resolve(fn_.DeviceGetBrand, {"nvmlDeviceGetBrand"}, false);
  resolve(fn_.DeviceGetArchitecture, {"nvmlDeviceGetArchitecture"}, false);
  resolve(fn_.DeviceGetNvLinkState, {"nvmlDeviceGetNvLinkState"}, false);
  resolve(fn_.DeviceGetNvLinkRemotePciInfo, {"nvmlDeviceGetNvLinkRemotePciInfo_v2"}, false);
  resolve(fn_.DeviceGetMigMode, {"nvmlDeviceGetMigMode"}, false);
  resolve(fn_.DeviceGetMaxMigDeviceCount, {"nvmlDeviceGetMaxMigDeviceCount"}, false);
  resolve(fn_.DeviceGetMigDeviceHandleByIndex, {"nvmlDeviceGetMigDeviceHandleByIndex"}, false);
  resolve(fn_.DeviceGetGpuInstanceId, {"nvmlDeviceGetGpuInstanceId"}, false);
  resolve(fn_.DeviceGetComputeInstanceId, {"nvmlDeviceGetComputeInstanceId"}, false);
  resolve(fn_.DeviceGetAttributes, {"nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"},
          false);
  resolve(fn_.DeviceGetGpuInstanceProfileInfo, {"nvmlDeviceGetGpuInstanceProfileInfo"}, false);
  resolve(fn_.DeviceGetGpuInstanceProfileInfoV, {"nvmlDeviceGetGpuInstanceProfileInfoV"}, false);
  resolve(fn_.DeviceGetGpuFabricInfo, {"nvmlDeviceGetGpuFabricInfo"}, false);
  resolve(fn_.DeviceGetGpuFabricInfoV, {"nvmlDeviceGetGpuFabricInfoV"}, false);
  resolve(fn_.DeviceGetSupportedEventTypes, {"nvmlDeviceGetSupportedEventTypes"}, false);
  resolve(fn_.DeviceRegisterEvents, {"nvmlDeviceRegisterEvents"}, false);
  resolve(fn_.EventSetCreate, {"nvmlEventSetCreate"}, false);
  // Required: R450's, and what makes R450 the floor (R396-R440 have every
  // other name here); MIG-scoped XIDs need its instance ids.
  resolve(fn_.EventSetWait, {"nvmlEventSetWait_v2"}, true);
  resolve(fn_.EventSetFree, {"nvmlEventSetFree"}, false);
  resolve(fn_.DeviceGetFieldValues, {"nvmlDeviceGetFieldValues"}, false);
  resolve(fn_.DeviceGetRemappedRows, {"nvmlDeviceGetRemappedRows"}, false);
  resolve(fn_.DeviceGetRetiredPagesPendingStatus, {"nvmlDeviceGetRetiredPagesPendingStatus"},
          false);
  resolve(fn_.DeviceGetTemperature, {"nvmlDeviceGetTemperature"}, false);
  resolve(fn_.DeviceGetTemperatureThreshold, {"nvmlDeviceGetTemperatureThreshold"}, false);
  resolve(fn_.DeviceGetCurrentClocksEventReasons,
          {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
          false);
  resolve(fn_.DeviceGetEccMode, {"nvmlDeviceGetEccMode"}, false);
  resolve(fn_.DeviceGetTotalEccErrors, {"nvmlDeviceGetTotalEccErrors"}, false);
  resolve(fn_.DeviceGetCurrPcieLinkWidth, {"nvmlDeviceGetCurrPcieLinkWidth"}, false);
  resolve(fn_.DeviceGetCurrPcieLinkGeneration, {"nvmlDeviceGetCurrPcieLinkGeneration"}, false);
  resolve(fn_.DeviceGetMaxPcieLinkWidth, {"nvmlDeviceGetMaxPcieLinkWidth"}, false);
  resolve(fn_.DeviceGetMaxPcieLinkGeneration, {"nvmlDeviceGetMaxPcieLinkGeneration"}, false);
  resolve(fn_.DeviceGetPcieReplayCounter, {"nvmlDeviceGetPcieReplayCounter"}, false);
  if (!missing.empty()) {
    return absl::UnimplementedError(
        StrCat(path_, " lacks the NVML functions ", StrJoin(missing, ", "),
               "; gpu-agent needs an NVIDIA driver of branch ", kOldestDriverBranch,
               " or newer, or the file is not NVIDIA's NVML"));
  }
  return absl::OkStatus();
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) {
    nvmlReturn_t r = fn_.Shutdown();
    if (r != NVML_SUCCESS) LogWarning("nvmlShutdown failed", {{"error", ErrorText(r)}});
  }
  // The handle stays open: NVML may own threads that outlive shutdown, and
  // unloading code under them would crash the process at exit.
}

absl::Status NvmlLibrary::Init() {
  if (initialized_) return absl::OkStatus();
  nvmlReturn_t r = fn_.Init();
  if (r != NVML_SUCCESS) {
    return absl::Status(CodeFor(r),
                        StrCat("NVML initialisation failed (", path_, "): ", ErrorText(r)));
  }
  initialized_ = true;
  return absl::OkStatus();
}

std::string NvmlLibrary::ErrorText(nvmlReturn_t r) const {
  const char* text = fn_.ErrorString ? fn_.ErrorString(r) : nullptr;
  return StrCat(text ? text : "unknown NVML error", " (", static_cast<int>(r), ")");
}

absl::Status NvmlLibrary::Check(nvmlReturn_t r, std::string_view what) const {
  if (r == NVML_SUCCESS) return absl::OkStatus();
  return absl::Status(CodeFor(r), StrCat(what, ": ", ErrorText(r)));
}

}  // namespace gpu_agent::nvml
