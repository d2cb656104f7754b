#include "in_process_nvml.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "device_answers.h"
#include "health_answers.h"

namespace fake_nvml {

namespace {

// One GPU or MIG device; nvmlDevice_t points at one of these.
struct Device : DeviceNode<Device> {};

}  // namespace

struct InProcessNvmlState {
  Fixture fixture;
  std::vector<std::unique_ptr<Device>> gpus;
  int init_count = 0;
};

namespace {

InProcessNvmlState* g_state = nullptr;  // the live fake's

nvmlDevice_t Handle(Device* d) { return reinterpret_cast<nvmlDevice_t>(d); }
Device* Dev(nvmlDevice_t h) { return reinterpret_cast<Device*>(h); }

// Common prologue of every device query, as the stand-in's: initialised,
// handle known, GPU not lost, no injected failure for `fn`.
nvmlReturn_t Check(nvmlDevice_t handle, const char* fn) {
  if (g_state == nullptr || g_state->init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (handle == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Device* d = Dev(handle);
  Device* gpu = d->is_mig ? d->parent : d;
  const bool known = std::any_of(g_state->gpus.begin(), g_state->gpus.end(),
                                 [&](const auto& g) { return g.get() == gpu; });
  if (!known) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->gpu.lost) return NVML_ERROR_GPU_IS_LOST;
  auto it = gpu->gpu.failures.find(fn);
  if (it != gpu->gpu.failures.end()) return static_cast<nvmlReturn_t>(it->second);
  return NVML_SUCCESS;
}

#define DEVICE_PROLOGUE(handle, fn)                                       \
  if (nvmlReturn_t r_ = Check(handle, fn); r_ != NVML_SUCCESS) return r_; \
  Device* d = Dev(handle)

#define SYSTEM_PROLOGUE()                                                              \
  if (g_state == nullptr || g_state->init_count == 0) return NVML_ERROR_UNINITIALIZED; \
  InProcessNvmlState& s = *g_state

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t Init() {
  if (g_state == nullptr) return NVML_ERROR_DRIVER_NOT_LOADED;
  if (g_state->fixture.init_error != 0) {
    return static_cast<nvmlReturn_t>(g_state->fixture.init_error);
  }
  ++g_state->init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t Shutdown() {
  if (g_state == nullptr || g_state->init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_state->init_count;
  return NVML_SUCCESS;
}

const char* ErrorString(nvmlReturn_t r) { return ErrorText(r); }

nvmlReturn_t SystemGetDriverVersion(char* version, unsigned length) {
  SYSTEM_PROLOGUE();
  return CopyString(s.fixture.driver_version, version, length);
}

nvmlReturn_t SystemGetNVMLVersion(char* version, unsigned length) {
  SYSTEM_PROLOGUE();
  return CopyString(s.fixture.nvml_version, version, length);
}

nvmlReturn_t SystemGetCudaDriverVersion(int* version) {
  // Documented to work without nvmlInit.
  if (version == nullptr || g_state == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *version = g_state->fixture.cuda_driver_version;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetCount(unsigned* count) {
  SYSTEM_PROLOGUE();
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(s.gpus.size());
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetHandleByIndex(unsigned index, nvmlDevice_t* device) {
  SYSTEM_PROLOGUE();
  if (device == nullptr || index >= s.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  Device* d = s.gpus[index].get();
  auto it = d->gpu.failures.find("nvmlDeviceGetHandleByIndex");
  if (it != d->gpu.failures.end()) return static_cast<nvmlReturn_t>(it->second);
  if (d->gpu.lost) return NVML_ERROR_GPU_IS_LOST;
  *device = Handle(d);
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  SYSTEM_PROLOGUE();
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Device* found = nullptr;
  const nvmlReturn_t r = FindByUuid(s.gpus, uuid, &found);
  if (r == NVML_SUCCESS) *device = Handle(found);
  return r;
}

nvmlReturn_t DeviceGetIndex(nvmlDevice_t device, unsigned* index) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetIndex");
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = d->is_mig ? d->parent->index : d->index;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetName");
  return CopyString(DeviceName(*d), name, length);
}

nvmlReturn_t DeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetUUID");
  return CopyString(d->is_mig ? d->mig.uuid : d->gpu.uuid, uuid, length);
}

nvmlReturn_t DeviceGetMinorNumber(nvmlDevice_t device, unsigned* minor) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetMinorNumber");
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *minor = d->gpu.minor;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetPciInfo_v3");
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FillPci(PhysicalGpu(*d).gpu, pci);
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetMemoryInfo");
  return AnswerMemoryInfo(*d, g_state->fixture.privileged, memory);
}

nvmlReturn_t DeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetBrand");
  if (type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *type = static_cast<nvmlBrandType_t>((d->is_mig ? d->parent : d)->gpu.brand);
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetArchitecture");
  if (arch == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *arch = (d->is_mig ? d->parent : d)->gpu.architecture;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetCudaComputeCapability");
  return AnswerComputeCapability(*d, major, minor);
}

nvmlReturn_t DeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                             nvmlGpuTopologyLevel_t* level) {
  const char* fn = "nvmlDeviceGetTopologyCommonAncestor";
  if (nvmlReturn_t r = Check(a, fn); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = Check(b, fn); r != NVML_SUCCESS) return r;
  return AnswerCommonAncestor(*Dev(a), *Dev(b), level);
}

nvmlReturn_t DeviceGetNvLinkState(nvmlDevice_t device, unsigned link, nvmlEnableState_t* active) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetNvLinkState");
  return AnswerNvLinkState(*d, link, active);
}

// The health checks' queries; on a MIG device handle, the GPU's answer.
const GpuFixture& GpuOf(const Device* d) { return d->is_mig ? d->parent->gpu : d->gpu; }

nvmlReturn_t DeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetFieldValues");
  const Device* gpu = d->is_mig ? d->parent : d;
  return AnswerFieldValues(gpu->gpu, gpu->link_peer, count, values);
}

nvmlReturn_t DeviceGetRemappedRows(nvmlDevice_t device, unsigned* corr, unsigned* unc,
                                   unsigned* pending, unsigned* failed) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetRemappedRows");
  if (corr == nullptr || unc == nullptr || pending == nullptr || failed == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (d->is_mig || !d->gpu.health.row_remapping) return NVML_ERROR_NOT_SUPPORTED;
  *corr = 0;
  *unc = d->gpu.remap_pending ? 1 : 0;
  *pending = d->gpu.remap_pending ? 1 : 0;
  *failed = d->gpu.remap_failed ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t* pending) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetRetiredPagesPendingStatus");
  if (pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *pending = d->gpu.pages_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                              nvmlEnableState_t* pending) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetEccMode");
  return AnswerEccMode(GpuOf(d), current, pending);
}

nvmlReturn_t DeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t type,
                                     nvmlEccCounterType_t counter, unsigned long long* count) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetTotalEccErrors");
  return AnswerTotalEccErrors(GpuOf(d), type, counter, count);
}

nvmlReturn_t DeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                  unsigned* temp) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetTemperature");
  return AnswerTemperature(GpuOf(d), sensor, temp);
}

nvmlReturn_t DeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t which,
                                           unsigned* temp) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetTemperatureThreshold");
  return AnswerTemperatureThreshold(GpuOf(d), which, temp);
}

nvmlReturn_t DeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* r) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetCurrentClocksEventReasons");
  return AnswerClocksEventReasons(GpuOf(d), r);
}

#define PCIE_QUERY(fn, name, field)                            \
  nvmlReturn_t fn(nvmlDevice_t device, unsigned* value) {      \
    DEVICE_PROLOGUE(device, name);                             \
    return AnswerPcie(GpuOf(d), &HealthFixture::field, value); \
  }
PCIE_QUERY(DeviceGetCurrPcieLinkWidth, "nvmlDeviceGetCurrPcieLinkWidth", pcie_width)
PCIE_QUERY(DeviceGetCurrPcieLinkGeneration, "nvmlDeviceGetCurrPcieLinkGeneration", pcie_generation)
PCIE_QUERY(DeviceGetMaxPcieLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth", pcie_max_width)
PCIE_QUERY(DeviceGetMaxPcieLinkGeneration, "nvmlDeviceGetMaxPcieLinkGeneration",
           pcie_max_generation)
PCIE_QUERY(DeviceGetPcieReplayCounter, "nvmlDeviceGetPcieReplayCounter", pcie_replays)
#undef PCIE_QUERY

nvmlReturn_t DeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned link, nvmlPciInfo_t* pci) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (pci == nullptr || d->is_mig || link >= d->link_peer.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const int peer = d->link_peer[link];
  if (peer < 0) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(g_state->gpus[static_cast<size_t>(peer)]->gpu, pci);
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetMigMode(nvmlDevice_t device, unsigned* current, unsigned* pending) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetMigMode");
  if (current == nullptr || pending == nullptr || d->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->gpu.cc_major < 8) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = d->gpu.mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned* count) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetMaxMigDeviceCount");
  if (count == nullptr || d->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  *count = d->gpu.mig_enabled ? d->gpu.max_mig_devices : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned index,
                                             nvmlDevice_t* mig) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetMigDeviceHandleByIndex");
  if (mig == nullptr || d->is_mig || !d->gpu.mig_enabled) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= d->gpu.max_mig_devices) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= d->mig_children.size()) return NVML_ERROR_NOT_FOUND;
  *mig = Handle(d->mig_children[index].get());
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetGpuInstanceId(nvmlDevice_t device, unsigned* id) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetGpuInstanceId");
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *id = d->mig.gpu_instance_id;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetComputeInstanceId(nvmlDevice_t device, unsigned* id) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetComputeInstanceId");
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *id = d->mig.compute_instance_id;
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t* attrs) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetAttributes_v2");
  return AnswerAttributes(*d, attrs);
}

nvmlReturn_t DeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned profile,
                                             nvmlGpuInstanceProfileInfo_t* info) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetGpuInstanceProfileInfo");
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const ProfileFixture* p = nullptr;
  if (nvmlReturn_t r = FindProfile(*d, profile, &p); r != NVML_SUCCESS) return r;
  std::memset(info, 0, sizeof *info);
  FillProfile(*p, info);
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned profile,
                                              nvmlGpuInstanceProfileInfo_v2_t* info) {
  DEVICE_PROLOGUE(device, "nvmlDeviceGetGpuInstanceProfileInfoV");
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const ProfileFixture* p = nullptr;
  if (nvmlReturn_t r = FindProfile(*d, profile, &p); r != NVML_SUCCESS) return r;
  std::memset(info, 0, sizeof *info);
  info->version = nvmlGpuInstanceProfileInfo_v2;
  FillProfile(*p, info);
  std::snprintf(info->name, sizeof info->name, "%s", p->name.c_str());
  return NVML_SUCCESS;
}

#undef DEVICE_PROLOGUE
#undef SYSTEM_PROLOGUE

}  // namespace

InProcessNvml::InProcessNvml(Fixture fixture) : state_(std::make_unique<InProcessNvmlState>()) {
  assert(g_state == nullptr && "one InProcessNvml at a time");
  InProcessNvmlState& s = *state_;
  s.fixture = std::move(fixture);
  s.gpus = BuildDeviceTree<Device>(s.fixture);
  g_state = state_.get();
}

InProcessNvml::~InProcessNvml() { g_state = nullptr; }

bool InProcessNvml::Set(unsigned gpu, const std::string& field, const std::string& value) {
  std::string error;
  if (gpu >= state_->gpus.size()) return false;
  return SetGpuField(&state_->gpus[gpu]->gpu, field, value, &error);
}

void InProcessNvml::Fail(unsigned gpu, const std::string& function, int code) {
  if (code == 0) {
    state_->gpus[gpu]->gpu.failures.erase(function);
  } else {
    state_->gpus[gpu]->gpu.failures[function] = code;
  }
}

void InProcessNvml::Lose(unsigned gpu, bool lost) { state_->gpus[gpu]->gpu.lost = lost; }

const gpu_agent::nvml::NvmlFunctions& InProcessNvml::Functions() {
  static const gpu_agent::nvml::NvmlFunctions fn = [] {
    gpu_agent::nvml::NvmlFunctions f;
    f.Init = Init;
    f.Shutdown = Shutdown;
    f.ErrorString = ErrorString;
    f.SystemGetDriverVersion = SystemGetDriverVersion;
    f.SystemGetNVMLVersion = SystemGetNVMLVersion;
    f.SystemGetCudaDriverVersion = SystemGetCudaDriverVersion;
    f.DeviceGetCount = DeviceGetCount;
    f.DeviceGetHandleByIndex = DeviceGetHandleByIndex;
    f.DeviceGetHandleByUUID = DeviceGetHandleByUUID;
    f.DeviceGetIndex = DeviceGetIndex;
    f.DeviceGetName = DeviceGetName;
    f.DeviceGetUUID = DeviceGetUUID;
    f.DeviceGetMinorNumber = DeviceGetMinorNumber;
    f.DeviceGetPciInfo = DeviceGetPciInfo;
    f.DeviceGetMemoryInfo = DeviceGetMemoryInfo;
    f.DeviceGetCudaComputeCapability = DeviceGetCudaComputeCapability;
    f.DeviceGetTopologyCommonAncestor = DeviceGetTopologyCommonAncestor;
    f.DeviceGetBrand = DeviceGetBrand;
    f.DeviceGetArchitecture = DeviceGetArchitecture;
    f.DeviceGetNvLinkState = DeviceGetNvLinkState;
    f.DeviceGetNvLinkRemotePciInfo = DeviceGetNvLinkRemotePciInfo;
    f.DeviceGetMigMode = DeviceGetMigMode;
    f.DeviceGetMaxMigDeviceCount = DeviceGetMaxMigDeviceCount;
    f.DeviceGetMigDeviceHandleByIndex = DeviceGetMigDeviceHandleByIndex;
    f.DeviceGetGpuInstanceId = DeviceGetGpuInstanceId;
    f.DeviceGetComputeInstanceId = DeviceGetComputeInstanceId;
    f.DeviceGetAttributes = DeviceGetAttributes;
    f.DeviceGetGpuInstanceProfileInfo = DeviceGetGpuInstanceProfileInfo;
    f.DeviceGetGpuInstanceProfileInfoV = DeviceGetGpuInstanceProfileInfoV;
    f.DeviceGetFieldValues = DeviceGetFieldValues;
    f.DeviceGetRemappedRows = DeviceGetRemappedRows;
    f.DeviceGetRetiredPagesPendingStatus = DeviceGetRetiredPagesPendingStatus;
    f.DeviceGetEccMode = DeviceGetEccMode;
    f.DeviceGetTotalEccErrors = DeviceGetTotalEccErrors;
    f.DeviceGetTemperature = DeviceGetTemperature;
    f.DeviceGetTemperatureThreshold = DeviceGetTemperatureThreshold;
    f.DeviceGetCurrentClocksEventReasons = DeviceGetCurrentClocksEventReasons;
    f.DeviceGetCurrPcieLinkWidth = DeviceGetCurrPcieLinkWidth;
    f.DeviceGetCurrPcieLinkGeneration = DeviceGetCurrPcieLinkGeneration;
    f.DeviceGetMaxPcieLinkWidth = DeviceGetMaxPcieLinkWidth;
    f.DeviceGetMaxPcieLinkGeneration = DeviceGetMaxPcieLinkGeneration;
    f.DeviceGetPcieReplayCounter = DeviceGetPcieReplayCounter;
    return f;
  }();
  return fn;
}

std::unique_ptr<gpu_agent::nvml::NvmlLibrary> InProcessNvml::Library() const {
  return gpu_agent::nvml::NvmlLibrary::FromFunctions(Functions(), "in-process NVML");
}

}  // namespace fake_nvml
