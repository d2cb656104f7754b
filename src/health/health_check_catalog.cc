#include "health/health_check_catalog.h"

namespace gpu_agent::health {

const std::array<CheckSpec, kCheckCount>& CheckSpecs() {
  // Defaults take a GPU out only for what breaks the jobs on it: memory the
  // driver could not repair, uncorrectable errors, a recovery action the
  // driver asks for, an NVLink gone down. What only slows jobs is degraded.
  static const std::array<CheckSpec, kCheckCount> kSpecs = {{
      {CheckId::kRowRemapPending, "rowRemapPending", Severity::kDegraded, false, 0, 0, 0, "", true,
       48, "a row remap waits for a GPU reset (nvmlDeviceGetRemappedRows)"},
      {CheckId::kRowRemapFailed, "rowRemapFailed", Severity::kUnhealthy, false, 0, 0, 0, "", true,
       48, "row remapping failed: the GPU's memory needs service"},
      {CheckId::kRetiredPagesPending, "retiredPagesPending", Severity::kDegraded, false, 0, 0, 0,
       "", true, 48, "page retirement waits for a GPU reset (GPUs before Ampere)"},
      {CheckId::kEccUncorrectable, "eccUncorrectable", Severity::kUnhealthy, true, 1, 1, 1e9,
       "new volatile uncorrectable ECC errors since the last poll", true, 48,
       "volatile uncorrectable ECC errors rising (GPUs with ECC on)"},
      {CheckId::kRecoveryAction, "recoveryAction", Severity::kUnhealthy, false, 0, 0, 0, "", true,
       -1, "the recovery action the driver asks for (R550+): reset, reboot, drain"},
      {CheckId::kTemperature, "temperature", Severity::kDegraded, true, 0, 0, 50,
       "degrees Celsius below the GPU's own slowdown temperature at which it counts", false, -1,
       "GPU temperature against its slowdown and shutdown thresholds"},
      {CheckId::kClockEvents, "clockEvents", Severity::kDegraded, false, 0, 0, 0, "", false, -1,
       "clocks held down by hardware slowdown, thermal slowdown or power brake"},
      {CheckId::kNvLink, "nvlink", Severity::kUnhealthy, true, 1, 1, 64,
       "links down (of those up at discovery) at which it counts", true, -1,
       "an NVLink link that was up at discovery is down (GPUs with NVLink only)"},
      {CheckId::kPcieWidth, "pcieWidth", Severity::kDegraded, false, 0, 0, 0, "", false, -1,
       "PCIe link width below the most the GPU and its slot allow"},
      {CheckId::kPcieGeneration, "pcieGeneration", Severity::kDegraded, false, 0, 0, 0, "", false,
       -1,
       "PCIe link generation below the most the GPU and its slot allow, while the GPU is busy "
       "(an idle GPU's link trains down to save power)"},
      {CheckId::kPcieReplays, "pcieReplays", Severity::kDegraded, true, 8, 1, 1e9,
       "PCIe replays per minute, between two polls, at which it counts", false, -1,
       "the rate of the PCIe replay counter"},
  }};
  return kSpecs;
}

const CheckSpec& Spec(CheckId id) { return CheckSpecs()[static_cast<size_t>(id)]; }

const CheckSpec* FindCheck(std::string_view name) {
  for (const CheckSpec& s : CheckSpecs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<std::string> CheckNames() {
  std::vector<std::string> out;
  for (const CheckSpec& s : CheckSpecs()) out.emplace_back(s.name);
  return out;
}

CheckSettings CheckSettings::Defaults() {
  CheckSettings out;
  for (const CheckSpec& s : CheckSpecs()) {
    out[s.id] = {s.default_severity, s.default_threshold};
  }
  return out;
}

}  // namespace gpu_agent::health
