// The health-check queries' answers from a GPU's fixture, written once for
// both NVML doubles (the dlopen stand-in and the in-process fake). Each
// takes the physical GPU's fixture after the double's own prologue (NVML
// initialised, handle known, GPU not lost, no injected failure).
#ifndef GPU_AGENT_TESTS_DOUBLES_NVML_HEALTH_ANSWERS_H_
#define GPU_AGENT_TESTS_DOUBLES_NVML_HEALTH_ANSWERS_H_

#include <algorithm>
#include <vector>

#include "fixture.h"
#include "nvml/nvml_api.h"

namespace fake_nvml {

inline nvmlReturn_t AnswerEccMode(const GpuFixture& g, nvmlEnableState_t* current,
                                  nvmlEnableState_t* pending) {
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = *pending = g.health.ecc ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

inline nvmlReturn_t AnswerTotalEccErrors(const GpuFixture& g, nvmlMemoryErrorType_t type,
                                         nvmlEccCounterType_t counter, unsigned long long* count) {
  if (count == nullptr || type > NVML_MEMORY_ERROR_TYPE_UNCORRECTED ||
      counter > NVML_AGGREGATE_ECC) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!g.health.ecc) return NVML_ERROR_NOT_SUPPORTED;  // NVML: "ECC is not enabled"
  *count = type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? g.health.ecc_uncorrected : 0;
  return NVML_SUCCESS;
}

inline nvmlReturn_t AnswerTemperature(const GpuFixture& g, nvmlTemperatureSensors_t sensor,
                                      unsigned* temp) {
  if (temp == nullptr || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = g.health.temperature;
  return NVML_SUCCESS;
}

inline nvmlReturn_t AnswerTemperatureThreshold(const GpuFixture& g,
                                               nvmlTemperatureThresholds_t which, unsigned* temp) {
  if (temp == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  switch (which) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
      *temp = g.health.shutdown_temperature;
      return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
      *temp = g.health.slowdown_temperature;
      return NVML_SUCCESS;
    default:
      return NVML_ERROR_NOT_SUPPORTED;
  }
}

inline nvmlReturn_t AnswerClocksEventReasons(const GpuFixture& g, unsigned long long* reasons) {
  if (reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *reasons = g.health.clock_event_reasons;
  return NVML_SUCCESS;
}

// "width", "generation", "maxWidth", "maxGeneration", "replays".
inline nvmlReturn_t AnswerPcie(const GpuFixture& g, unsigned HealthFixture::*field,
                               unsigned* value) {
  if (value == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *value = g.health.*field;
  return NVML_SUCCESS;
}

inline bool LinkDown(const GpuFixture& g, unsigned link) {
  const std::vector<unsigned>& down = g.health.nvlinks_down;
  return std::find(down.begin(), down.end(), link) != down.end();
}

// nvmlDeviceGetFieldValues over `link_peer` (a GPU's NVLink slots): the
// recovery action and NVLink link state; other fields NOT_SUPPORTED.
inline nvmlReturn_t AnswerFieldValues(const GpuFixture& g, const std::vector<int>& link_peer,
                                      int count, nvmlFieldValue_t* values) {
  if (values == nullptr || count <= 0) return NVML_ERROR_INVALID_ARGUMENT;
  const bool any_link =
      std::any_of(link_peer.begin(), link_peer.end(), [](int p) { return p >= 0; });
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& v = values[i];
    v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (v.fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) {
      v.valueType = 1;  // NVML_VALUE_TYPE_UNSIGNED_INT
      v.nvmlReturn = NVML_SUCCESS;
      v.value.uiVal = g.recovery_action;
    } else if (v.fieldId == NVML_FI_DEV_NVLINK_GET_STATE && g.health.nvlink_state_field &&
               any_link) {
      if (v.scopeId >= link_peer.size()) {
        v.nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        continue;
      }
      v.valueType = 1;
      v.nvmlReturn = NVML_SUCCESS;
      v.value.uiVal = link_peer[v.scopeId] >= 0 && !LinkDown(g, v.scopeId) ? NVML_FEATURE_ENABLED
                                                                           : NVML_FEATURE_DISABLED;
    }
  }
  return NVML_SUCCESS;
}

}  // namespace fake_nvml

#endif  // GPU_AGENT_TESTS_DOUBLES_NVML_HEALTH_ANSWERS_H_
