#include "health/gpu_sample.h"

#include <algorithm>

#include "nvml/nvml_library.h"

namespace gpu_agent::health {
namespace {

// Calls `fn(dev, &out.value)` when the driver has it, counting the call.
template <typename T, typename Fn>
Answered<T> AskUint(Fn fn, nvmlDevice_t dev, int* calls) {
  Answered<T> a;
  if (fn == nullptr) return a;
  ++*calls;
  unsigned v = 0;
  a.code = fn(dev, &v);
  if (a.ok()) a.value = v;
  return a;
}

Answered<unsigned> Threshold(const nvml::NvmlFunctions& f, nvmlDevice_t dev,
                             nvmlTemperatureThresholds_t which, int* calls) {
  Answered<unsigned> a;
  if (f.DeviceGetTemperatureThreshold == nullptr) return a;
  ++*calls;
  a.code = f.DeviceGetTemperatureThreshold(dev, which, &a.value);
  return a;
}

}  // namespace

GpuFacts ReadFacts(const nvml::NvmlLibrary& lib, nvmlDevice_t dev) {
  const nvml::NvmlFunctions& f = lib.fn();
  GpuFacts facts;
  int* calls = &facts.nvml_calls;
  if (f.DeviceGetEccMode) {
    ++*calls;
    nvmlEnableState_t current = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
    facts.ecc_enabled.code = f.DeviceGetEccMode(dev, &current, &pending);
    facts.ecc_enabled.value = current == NVML_FEATURE_ENABLED;
  }
  facts.slowdown_c = Threshold(f, dev, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, calls);
  facts.shutdown_c = Threshold(f, dev, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, calls);
  if (f.DeviceGetRemappedRows) {
    ++*calls;
    unsigned corr = 0, unc = 0, pending = 0, failed = 0;
    facts.row_remapping.code = f.DeviceGetRemappedRows(dev, &corr, &unc, &pending, &failed);
    facts.row_remapping.value = facts.row_remapping.ok();
  }
  facts.max_link_width = AskUint<unsigned>(f.DeviceGetMaxPcieLinkWidth, dev, calls);
  facts.max_link_generation = AskUint<unsigned>(f.DeviceGetMaxPcieLinkGeneration, dev, calls);
  if (f.DeviceGetNvLinkState) {
    // Links are numbered from 0; past the GPU's last one NVML answers
    // INVALID_ARGUMENT (or NOT_SUPPORTED), and a PCIe-only GPU answers
    // NOT_SUPPORTED for link 0.
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      ++*calls;
      const nvmlReturn_t r = f.DeviceGetNvLinkState(dev, link, &active);
      if (link == 0) facts.nvlinks_up.code = r;
      if (r != NVML_SUCCESS) break;
      if (active == NVML_FEATURE_ENABLED) facts.nvlinks_up.value.push_back(link);
    }
  }
  const std::vector<unsigned>& up = facts.nvlinks_up.value;
  if (!up.empty() && f.DeviceGetFieldValues) {
    // One call for every link beats one a link, where the driver has the
    // field (Hopper and later): use it only when it answers for each.
    std::vector<nvmlFieldValue_t> v(up.size());
    for (size_t i = 0; i < up.size(); ++i) {
      v[i].fieldId = NVML_FI_DEV_NVLINK_GET_STATE;
      v[i].scopeId = up[i];
    }
    ++*calls;
    bool all = f.DeviceGetFieldValues(dev, static_cast<int>(v.size()), v.data()) == NVML_SUCCESS;
    for (const nvmlFieldValue_t& fv : v) all = all && fv.nvmlReturn == NVML_SUCCESS;
    facts.nvlink_by_field = all;
  }
  return facts;
}

GpuSample ReadSample(const nvml::NvmlLibrary& lib, nvmlDevice_t dev, const GpuFacts& facts,
                     size_t call_budget, size_t* link_cursor) {
  const nvml::NvmlFunctions& f = lib.fn();
  GpuSample s;
  int* calls = &s.nvml_calls;
  const std::vector<unsigned>& links = facts.nvlinks_up.value;
  if (f.DeviceGetFieldValues) {
    // The recovery action, and the links' state where read by field.
    std::vector<nvmlFieldValue_t> v(1);
    v[0].fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
    if (facts.nvlink_by_field) {
      for (unsigned link : links) {
        nvmlFieldValue_t fv{};
        fv.fieldId = NVML_FI_DEV_NVLINK_GET_STATE;
        fv.scopeId = link;
        v.push_back(fv);
      }
    }
    ++*calls;
    const nvmlReturn_t r = f.DeviceGetFieldValues(dev, static_cast<int>(v.size()), v.data());
    s.recovery_action.code = r == NVML_SUCCESS ? v[0].nvmlReturn : r;
    if (s.recovery_action.ok()) s.recovery_action.value = v[0].value.uiVal;
    for (size_t i = 1; i < v.size(); ++i) {
      Answered<bool>& a = s.nvlink_up[v[i].scopeId];
      a.code = r == NVML_SUCCESS ? v[i].nvmlReturn : r;
      a.value = a.ok() && v[i].value.uiVal == NVML_FEATURE_ENABLED;
    }
  }
  if (facts.row_remapping.absent()) {
    s.remapped_rows.code = facts.row_remapping.code;  // asked once, at discovery
  } else if (f.DeviceGetRemappedRows) {
    ++*calls;
    RemappedRows& rr = s.remapped_rows.value;
    s.remapped_rows.code =
        f.DeviceGetRemappedRows(dev, &rr.corrected, &rr.uncorrected, &rr.pending, &rr.failed);
  }
  // Page retirement is the memory repair of GPUs before Ampere, which have
  // no row remapping.
  if (f.DeviceGetRetiredPagesPendingStatus && s.remapped_rows.absent()) {
    ++*calls;
    nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
    s.pages_pending.code = f.DeviceGetRetiredPagesPendingStatus(dev, &pending);
    s.pages_pending.value = pending == NVML_FEATURE_ENABLED;
  }
  if (f.DeviceGetTotalEccErrors && facts.ecc_enabled.ok() && facts.ecc_enabled.value) {
    ++*calls;
    s.ecc_uncorrected.code = f.DeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                       NVML_VOLATILE_ECC, &s.ecc_uncorrected.value);
  }
  if (f.DeviceGetTemperature && facts.slowdown_c.ok()) {
    ++*calls;
    s.temperature_c.code =
        f.DeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &s.temperature_c.value);
  }
  if (f.DeviceGetCurrentClocksEventReasons) {
    ++*calls;
    s.clock_reasons.code = f.DeviceGetCurrentClocksEventReasons(dev, &s.clock_reasons.value);
  }
  if (facts.max_link_width.ok()) {
    s.link_width = AskUint<unsigned>(f.DeviceGetCurrPcieLinkWidth, dev, calls);
  }
  if (facts.max_link_generation.ok()) {
    s.link_generation = AskUint<unsigned>(f.DeviceGetCurrPcieLinkGeneration, dev, calls);
  }
  s.replays = AskUint<unsigned>(f.DeviceGetPcieReplayCounter, dev, calls);
  // Last: as many links as the budget leaves.
  if (!facts.nvlink_by_field && f.DeviceGetNvLinkState && !links.empty()) {
    const size_t used = static_cast<size_t>(*calls);
    const size_t budget = call_budget > used ? call_budget - used : 1;
    const size_t n =
        link_cursor ? std::min(std::max<size_t>(budget, 1), links.size()) : links.size();
    const size_t start = link_cursor ? *link_cursor % links.size() : 0;
    if (link_cursor) *link_cursor = (start + n) % links.size();
    for (size_t i = 0; i < n; ++i) {
      const unsigned link = links[(start + i) % links.size()];
      Answered<bool>& a = s.nvlink_up[link];
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      ++*calls;
      a.code = f.DeviceGetNvLinkState(dev, link, &active);
      a.value = a.ok() && active == NVML_FEATURE_ENABLED;
    }
  }

  auto lost = [](nvmlReturn_t r) { return r == NVML_ERROR_GPU_IS_LOST; };
  s.lost = lost(s.recovery_action.code) || lost(s.remapped_rows.code) ||
           lost(s.temperature_c.code) || lost(s.clock_reasons.code) || lost(s.replays.code) ||
           lost(s.link_width.code);
  return s;
}

}  // namespace gpu_agent::health
