// The NVML queries behind the polled health checks, on one GPU's handle:
// what is asked once at discovery (GpuFacts: ECC mode, temperature
// thresholds, the PCIe link's maximum, the NVLink links up) and what each
// poll reads (GpuSample). Every answer keeps NVML's return code, so a check
// can tell NOT_SUPPORTED (turn the check off) from a passing failure, and
// the report can show what NVML said. A function the driver does not export
// reads as NVML_ERROR_FUNCTION_NOT_FOUND.
#ifndef GPU_AGENT_HEALTH_GPU_SAMPLE_H_
#define GPU_AGENT_HEALTH_GPU_SAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nvml/nvml_api.h"

namespace gpu_agent::nvml {

class NvmlLibrary;

}  // namespace gpu_agent::nvml

namespace gpu_agent::health {

template <typename T>
struct Answered {
  nvmlReturn_t code = NVML_ERROR_FUNCTION_NOT_FOUND;
  T value{};
  bool ok() const { return code == NVML_SUCCESS; }
  // The query is not there to ask: not supported, or not exported.
  bool absent() const {
    return code == NVML_ERROR_NOT_SUPPORTED || code == NVML_ERROR_FUNCTION_NOT_FOUND;
  }
};

struct RemappedRows {
  unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
};

// Asked once, when the poller first sees the GPU.
struct GpuFacts {
  Answered<bool> ecc_enabled;  // nvmlDeviceGetEccMode's current mode
  Answered<unsigned> slowdown_c, shutdown_c;
  Answered<unsigned> max_link_width, max_link_generation;
  // nvmlDeviceGetRemappedRows's answer at discovery: where it is absent
  // (GPUs before Ampere) it is not asked again, and retired pages are.
  Answered<bool> row_remapping;
  // The NVLink links up at discovery; nvlink.code is the first link's
  // answer (NOT_SUPPORTED on a PCIe-only GPU).
  Answered<std::vector<unsigned>> nvlinks_up;
  // Whether the links' state is read through nvmlDeviceGetFieldValues
  // (NVML_FI_DEV_NVLINK_GET_STATE, with the recovery action in the same
  // call) rather than one nvmlDeviceGetNvLinkState call per link.
  bool nvlink_by_field = false;
  int nvml_calls = 0;
};

// One poll's readings. Queries a fact makes moot are not asked (retired
// pages where row remapping answers, ECC counters with ECC off).
struct GpuSample {
  bool lost = false;  // some query answered GPU_IS_LOST
  Answered<unsigned> recovery_action;
  Answered<RemappedRows> remapped_rows;
  Answered<bool> pages_pending;
  Answered<unsigned long long> ecc_uncorrected;  // volatile
  Answered<unsigned> temperature_c;
  Answered<unsigned long long> clock_reasons;
  std::map<unsigned, Answered<bool>> nvlink_up;  // by link, the links of GpuFacts
  Answered<unsigned> link_width, link_generation;
  Answered<unsigned> replays;
  int nvml_calls = 0;
};

GpuFacts ReadFacts(const nvml::NvmlLibrary& lib, nvmlDevice_t dev);
// Where the links' state is read one call a link (no field value), the
// links are read last, as many as keep the sample within `call_budget`
// NVML calls (one at least), in turn from `*link_cursor` (advanced); a null
// cursor reads every link.
GpuSample ReadSample(const nvml::NvmlLibrary& lib, nvmlDevice_t dev, const GpuFacts& facts,
                     size_t call_budget = SIZE_MAX, size_t* link_cursor = nullptr);

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_GPU_SAMPLE_H_
