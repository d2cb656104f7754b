// An NVML as drivers before R450 (R396-R440) shipped it, as far as
// gpu-agent can tell: the versioned PCI, count and handle functions, but no
// nvmlEventSetWait_v2 (MIG-scoped events came with R450), and the old
// unversioned names beside. gpu-agent must refuse it by name. Nothing here is
// ever called.
#define LEGACY_EXPORT extern "C" __attribute__((visibility("default")))

LEGACY_EXPORT int nvmlInit() { return 0; }
LEGACY_EXPORT int nvmlInit_v2() { return 0; }
LEGACY_EXPORT int nvmlShutdown() { return 0; }
LEGACY_EXPORT const char* nvmlErrorString(int) { return "legacy"; }
LEGACY_EXPORT int nvmlSystemGetDriverVersion(char*, unsigned) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetCount(unsigned*) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetCount_v2(unsigned*) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetHandleByIndex(unsigned, void**) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned, void**) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetHandleByUUID(const char*, void**) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetName(void*, char*, unsigned) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetUUID(void*, char*, unsigned) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetMinorNumber(void*, unsigned*) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetPciInfo(void*, void*) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetPciInfo_v3(void*, void*) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetMemoryInfo(void*, void*) { return 0; }
LEGACY_EXPORT int nvmlDeviceGetCudaComputeCapability(void*, int*, int*) { return 0; }
LEGACY_EXPORT int nvmlEventSetWait(void*, void*, unsigned) { return 0; }
