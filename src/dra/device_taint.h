// Device taints as resource.k8s.io has them (DeviceTaint, DeviceToleration)
// and the rule by which a toleration tolerates a taint, written after
// k8s.io/dynamic-resource-allocation/resourceclaim.ToleratesTaint: the
// slices carry the taints, a claim's allocation results the tolerations the
// scheduler matched, and prepare refuses an unhealthy device only to a
// claim that neither tolerates its taint nor asks for admin access.
#ifndef GPU_AGENT_DRA_DEVICE_TAINT_H_
#define GPU_AGENT_DRA_DEVICE_TAINT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpu_agent::dra {

// None: informational (API servers of 1.36 and later); NoSchedule: no new
// claim is allocated the device unless it tolerates the taint; NoExecute:
// also evicts the pods of claims already allocated it that do not.
enum class TaintEffect { kNone, kNoSchedule, kNoExecute };
std::string_view TaintEffectName(TaintEffect e);  // "None", "NoSchedule", "NoExecute"
std::optional<TaintEffect> ParseTaintEffect(std::string_view name);

struct DeviceTaint {
  std::string key;    // "<driver>/unhealthy"
  std::string value;  // a label value: why
  TaintEffect effect = TaintEffect::kNoSchedule;
  friend bool operator==(const DeviceTaint&, const DeviceTaint&) = default;
};

struct DeviceToleration {
  std::string key;     // empty: every key (with operator Exists)
  std::string op;      // "Equal" (also when empty) or "Exists"
  std::string value;   // Equal: must be the taint's
  std::string effect;  // empty: every effect
};

// resourceclaim.ToleratesTaint: the effect (when given) and key (when
// given) must be the taint's; Exists takes any value, Equal (or none) the
// taint's value; any other operator tolerates nothing.
bool Tolerates(const DeviceToleration& toleration, const DeviceTaint& taint);

// Whether `taint` keeps the device from a claim whose result holds
// `tolerations`: a NoSchedule or NoExecute taint that none of them
// tolerates. A None taint keeps nothing away.
bool KeepsAway(const DeviceTaint& taint, const std::vector<DeviceToleration>& tolerations);

// "<key>=<value>:<effect>", as kubectl prints a taint.
std::string TaintString(const DeviceTaint& taint);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_DEVICE_TAINT_H_
