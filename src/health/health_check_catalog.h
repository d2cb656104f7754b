// The polled GPU health checks beyond XIDs: their names (the keys of
// health.checks.<name> in the config), what each looks at, its default
// severity and the meaning and range of its threshold. Known to the config
// (which validates settings against it), the poller and the report.
#ifndef GPU_AGENT_HEALTH_HEALTH_CHECK_CATALOG_H_
#define GPU_AGENT_HEALTH_HEALTH_CHECK_CATALOG_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "health/severity.h"

namespace gpu_agent::health {

enum class CheckId {
  kRowRemapPending,
  kRowRemapFailed,
  kRetiredPagesPending,
  kEccUncorrectable,
  kRecoveryAction,
  kTemperature,
  kClockEvents,
  kNvLink,
  kPcieWidth,
  kPcieGeneration,
  kPcieReplays,
};
inline constexpr size_t kCheckCount = 11;

struct CheckSpec {
  CheckId id;
  std::string_view name;  // config key and report name
  Severity default_severity;
  // Whether a threshold applies, its default and its inclusive range.
  bool has_threshold = false;
  double default_threshold = 0, min_threshold = 0, max_threshold = 0;
  std::string_view threshold_means;  // "" without a threshold
  // When unhealthy: whether only NVML's evidence of a reset (or SIGUSR1)
  // brings the GPU back, as after a reset-class XID, and the XID whose
  // evidence rules apply (48: a memory repair; -1: the recovery action).
  bool needs_reset = false;
  int evidence_xid = -1;
  std::string_view what;  // one line for docs and the report
};

// Every check, in CheckId order.
const std::array<CheckSpec, kCheckCount>& CheckSpecs();
const CheckSpec& Spec(CheckId id);
const CheckSpec* FindCheck(std::string_view name);
std::vector<std::string> CheckNames();

// One check's configured severity and threshold.
struct CheckSetting {
  Severity severity = Severity::kDegraded;
  double threshold = 0;
};

// Every check's setting; Defaults() is the catalog's.
struct CheckSettings {
  std::array<CheckSetting, kCheckCount> by_id;
  static CheckSettings Defaults();
  const CheckSetting& operator[](CheckId id) const { return by_id[static_cast<size_t>(id)]; }
  CheckSetting& operator[](CheckId id) { return by_id[static_cast<size_t>(id)]; }
  friend bool operator==(const CheckSettings&, const CheckSettings&) = default;
};
inline bool operator==(const CheckSetting& a, const CheckSetting& b) {
  return a.severity == b.severity && a.threshold == b.threshold;
}

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_CHECK_CATALOG_H_
