// The subset of NVIDIA's NVML C ABI this project uses, declared from NVIDIA's
// documented headers (nvml.h): types, constants, struct layouts byte for byte,
// and the versioned symbol names the driver exports. There is no NVML header
// package on Debian, and the library is loaded with dlopen, never linked.
//
// Both the agent (through function pointers) and the libnvidia-ml stand-in in
// tests/ (as exported definitions) use these declarations.
#ifndef GPU_AGENT_NVML_NVML_API_H_
#define GPU_AGENT_NVML_NVML_API_H_

#include <cstddef>

extern "C" {

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

enum {
  NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16,
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80,
  NVML_NVLINK_MAX_LINKS = 18,  // of the nvml.h this was written from; newer ones raise it
};

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;  // (device id << 16) | vendor id
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:BB:DD.F"
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlDeviceAttributes_st {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

// A GPU-instance profile: nvmlDeviceGetGpuInstanceProfileInfo fills the
// first struct, nvmlDeviceGetGpuInstanceProfileInfoV (R510+) the second,
// with the profile's name. `profile` is an NVML_GPU_INSTANCE_PROFILE_* index
// (0 ... 16 in R590's nvml.h); `id` is the profile's id within the GPU.
// The fields both versions share, in NVIDIA's order. Spelled once; each
// struct keeps its own layout (v2's `version` comes first, so v1 cannot
// simply be embedded: its 8-byte alignment would move every field).
#define GPU_AGENT_NVML_GPU_INSTANCE_PROFILE_FIELDS \
  unsigned int id;                                 \
  unsigned int isP2pSupported;                     \
  unsigned int sliceCount;                         \
  unsigned int instanceCount;                      \
  unsigned int multiprocessorCount;                \
  unsigned int copyEngineCount;                    \
  unsigned int decoderCount;                       \
  unsigned int encoderCount;                       \
  unsigned int jpegCount;                          \
  unsigned int ofaCount;                           \
  unsigned long long memorySizeMB;

typedef struct nvmlGpuInstanceProfileInfo_st {
  GPU_AGENT_NVML_GPU_INSTANCE_PROFILE_FIELDS
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
  unsigned int version;  // nvmlGpuInstanceProfileInfo_v2
  GPU_AGENT_NVML_GPU_INSTANCE_PROFILE_FIELDS
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];  // "MIG 1g.10gb"
} nvmlGpuInstanceProfileInfo_v2_t;

#undef GPU_AGENT_NVML_GPU_INSTANCE_PROFILE_FIELDS

// NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2): the size, version in the top byte.
enum : unsigned int {
  nvmlGpuInstanceProfileInfo_v2 =
      static_cast<unsigned int>(sizeof(nvmlGpuInstanceProfileInfo_v2_t)) | (2u << 24)
};

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;    // 0xFFFFFFFF when not MIG-scoped
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef enum nvmlGpuLevel_enum {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;

typedef enum nvmlBrandType_enum {
  NVML_BRAND_UNKNOWN = 0,
  NVML_BRAND_QUADRO = 1,
  NVML_BRAND_TESLA = 2,
  NVML_BRAND_NVS = 3,
  NVML_BRAND_GRID = 4,
  NVML_BRAND_GEFORCE = 5,
  NVML_BRAND_TITAN = 6,
  NVML_BRAND_NVIDIA_VAPPS = 7,
  NVML_BRAND_NVIDIA_VPC = 8,
  NVML_BRAND_NVIDIA_VCS = 9,
  NVML_BRAND_NVIDIA_VWS = 10,
  NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
  NVML_BRAND_QUADRO_RTX = 12,
  NVML_BRAND_NVIDIA_RTX = 13,
  NVML_BRAND_NVIDIA = 14,
  NVML_BRAND_GEFORCE_RTX = 15,
  NVML_BRAND_TITAN_RTX = 16,
} nvmlBrandType_t;

typedef unsigned int nvmlDeviceArchitecture_t;
enum {
  NVML_DEVICE_ARCH_KEPLER = 2,
  NVML_DEVICE_ARCH_MAXWELL = 3,
  NVML_DEVICE_ARCH_PASCAL = 4,
  NVML_DEVICE_ARCH_VOLTA = 5,
  NVML_DEVICE_ARCH_TURING = 6,
  NVML_DEVICE_ARCH_AMPERE = 7,
  NVML_DEVICE_ARCH_ADA = 8,
  NVML_DEVICE_ARCH_HOPPER = 9,
  NVML_DEVICE_ARCH_BLACKWELL = 10,
  NVML_DEVICE_ARCH_UNKNOWN = 0xffffffff,
};

// Event types (bit mask).
enum : unsigned long long {
  nvmlEventTypeSingleBitEccError = 0x0000000000000001ULL,
  nvmlEventTypeDoubleBitEccError = 0x0000000000000002ULL,
  nvmlEventTypePState = 0x0000000000000004ULL,
  nvmlEventTypeXidCriticalError = 0x0000000000000008ULL,
  nvmlEventTypeClock = 0x0000000000000010ULL,
  nvmlEventTypePowerSourceChange = 0x0000000000000080ULL,
  nvmlEventMigConfigChange = 0x0000000000000100ULL,
};

enum { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };
// Returned in nvmlEventData_t ids when an event is not scoped to a MIG instance.
enum : unsigned int { NVML_MIG_INSTANCE_ID_NONE = 0xFFFFFFFFu };

// nvmlDeviceGetFieldValues: one field, the driver's recovery action (R550+).
enum : unsigned int { NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230 };
typedef enum nvmlDeviceGpuRecoveryAction_s {
  NVML_GPU_RECOVERY_ACTION_NONE = 0,
  NVML_GPU_RECOVERY_ACTION_GPU_RESET = 1,
  NVML_GPU_RECOVERY_ACTION_NODE_REBOOT = 2,
  NVML_GPU_RECOVERY_ACTION_DRAIN_P2P = 3,
  NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET = 4
} nvmlDeviceGpuRecoveryAction_t;

// Health checks (health_checks.h). Per NVIDIA's nvml.h.
// nvmlDeviceGetTemperature's sensor; nvmlDeviceGetTemperatureThreshold's kinds.
typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum nvmlTemperatureThresholds_enum {
  NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
  NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
  NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
  NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
} nvmlTemperatureThresholds_t;
// nvmlDeviceGetTotalEccErrors's error and counter kinds.
typedef enum nvmlMemoryErrorType_enum {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
} nvmlMemoryErrorType_t;
typedef enum nvmlEccCounterType_enum {
  NVML_VOLATILE_ECC = 0,   // since the driver loaded (or the GPU was reset)
  NVML_AGGREGATE_ECC = 1,  // over the GPU's life
} nvmlEccCounterType_t;
// Clock event reasons (formerly "throttle reasons"), a bit mask.
enum : unsigned long long {
  nvmlClocksEventReasonGpuIdle = 0x0000000000000001ULL,
  nvmlClocksEventReasonApplicationsClocksSetting = 0x0000000000000002ULL,
  nvmlClocksEventReasonSwPowerCap = 0x0000000000000004ULL,
  nvmlClocksEventReasonHwSlowdown = 0x0000000000000008ULL,
  nvmlClocksEventReasonSyncBoost = 0x0000000000000010ULL,
  nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020ULL,
  nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040ULL,
  nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x0000000000000080ULL,
  nvmlClocksEventReasonDisplayClockSetting = 0x0000000000000100ULL,
};
// nvmlDeviceGetFieldValues field: one NVLink link's state (scopeId: the
// link; value.uiVal an nvmlEnableState_t), answered on Hopper and later.
enum : unsigned int { NVML_FI_DEV_NVLINK_GET_STATE = 165 };

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

// GPU fabric (multi-node NVLink) registration: nvmlDeviceGetGpuFabricInfo
// (R535+) fills the first struct, nvmlDeviceGetGpuFabricInfoV (R550+) the
// second when its version is nvmlGpuFabricInfo_v2. `status` is meaningful
// only once `state` is NVML_GPU_FABRIC_STATE_COMPLETED.
enum { NVML_GPU_FABRIC_UUID_LEN = 16 };
typedef unsigned char nvmlGpuFabricState_t;
enum : unsigned char {
  NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0,
  NVML_GPU_FABRIC_STATE_NOT_STARTED = 1,
  NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2,
  NVML_GPU_FABRIC_STATE_COMPLETED = 3
};

typedef struct {
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

typedef struct {
  unsigned int version;  // nvmlGpuFabricInfo_v2
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
  unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
typedef nvmlGpuFabricInfo_v2_t nvmlGpuFabricInfoV_t;

// NVML_STRUCT_VERSION(GpuFabricInfo, 2): 0x02000024.
enum : unsigned int {
  nvmlGpuFabricInfo_v2 = static_cast<unsigned int>(sizeof(nvmlGpuFabricInfo_v2_t)) | (2u << 24)
};

// Function types, one per symbol used (name = symbol name + "_fn").
typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlInitWithFlags_fn)(unsigned int);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char*, unsigned int);
typedef nvmlReturn_t (*nvmlSystemGetNVMLVersion_fn)(char*, unsigned int);
typedef nvmlReturn_t (*nvmlSystemGetCudaDriverVersion_fn)(int*);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByUUID_fn)(const char*, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByPciBusId_v2_fn)(const char*, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetIndex_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetMinorNumber_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t, nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t, int, nvmlFieldValue_t*);
// corrRows, uncRows, isPending, failureOccurred
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t, unsigned int*, unsigned int*,
                                                     unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetRetiredPagesPendingStatus_fn)(nvmlDevice_t, nvmlEnableState_t*);
typedef nvmlReturn_t (*nvmlDeviceGetBrand_fn)(nvmlDevice_t, nvmlBrandType_t*);
typedef nvmlReturn_t (*nvmlDeviceGetArchitecture_fn)(nvmlDevice_t, nvmlDeviceArchitecture_t*);
typedef nvmlReturn_t (*nvmlDeviceGetCudaComputeCapability_fn)(nvmlDevice_t, int*, int*);
typedef nvmlReturn_t (*nvmlDeviceGetTopologyCommonAncestor_fn)(nvmlDevice_t, nvmlDevice_t,
                                                               nvmlGpuTopologyLevel_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkRemotePciInfo_v2_fn)(nvmlDevice_t, unsigned int,
                                                               nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int,
                                                               nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn)(nvmlDevice_t,
                                                                        nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceIsMigDeviceHandle_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceId_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetComputeInstanceId_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetAttributes_v2_fn)(nvmlDevice_t, nvmlDeviceAttributes_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceProfileInfo_fn)(nvmlDevice_t, unsigned int,
                                                               nvmlGpuInstanceProfileInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceProfileInfoV_fn)(nvmlDevice_t, unsigned int,
                                                                nvmlGpuInstanceProfileInfo_v2_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuFabricInfo_fn)(nvmlDevice_t, nvmlGpuFabricInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuFabricInfoV_fn)(nvmlDevice_t, nvmlGpuFabricInfoV_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                                    unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperatureThreshold_fn)(nvmlDevice_t,
                                                             nvmlTemperatureThresholds_t,
                                                             unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetCurrentClocksEventReasons_fn)(nvmlDevice_t,
                                                                  unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetEccMode_fn)(nvmlDevice_t, nvmlEnableState_t* current,
                                                nvmlEnableState_t* pending);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t, nvmlMemoryErrorType_t,
                                                       nvmlEccCounterType_t, unsigned long long*);
// nvmlDeviceGetCurrPcieLinkWidth, ...Generation, nvmlDeviceGetMaxPcieLinkWidth,
// ...Generation (the most the GPU and its slot allow), nvmlDeviceGetPcieReplayCounter.
typedef nvmlReturn_t (*nvmlDeviceGetUintValue_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetSupportedEventTypes_fn)(nvmlDevice_t, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t, unsigned long long,
                                                    nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t*);
typedef nvmlReturn_t (*nvmlEventSetWait_v2_fn)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t);

}  // extern "C"

static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t must match NVIDIA's ABI");
static_assert(offsetof(nvmlPciInfo_t, domain) == 16);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "busId sits at offset 36");
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlDeviceAttributes_t) == 40);
static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48);
static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB) == 48);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(offsetof(nvmlEventData_t, gpuInstanceId) == 24);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlFieldValue_t, value) == 32);
static_assert(sizeof(nvmlGpuFabricInfo_t) == 28);
static_assert(offsetof(nvmlGpuFabricInfo_t, state) == 24);
static_assert(sizeof(nvmlGpuFabricInfo_v2_t) == 36);
static_assert(offsetof(nvmlGpuFabricInfo_v2_t, cliqueId) == 24);
static_assert(offsetof(nvmlGpuFabricInfo_v2_t, healthMask) == 32);
static_assert(nvmlGpuFabricInfo_v2 == 0x02000024u);

#endif  // GPU_AGENT_NVML_NVML_API_H_
