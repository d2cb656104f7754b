#include "dra/device_taint.h"

#include "base/strings.h"

namespace gpu_agent::dra {

std::string_view TaintEffectName(TaintEffect e) {
  switch (e) {
    case TaintEffect::kNone:
      return "None";
    case TaintEffect::kNoSchedule:
      return "NoSchedule";
    case TaintEffect::kNoExecute:
      return "NoExecute";
  }
  return "NoSchedule";
}

std::optional<TaintEffect> ParseTaintEffect(std::string_view name) {
  for (TaintEffect e : {TaintEffect::kNone, TaintEffect::kNoSchedule, TaintEffect::kNoExecute}) {
    if (name == TaintEffectName(e)) return e;
  }
  return std::nullopt;
}

bool Tolerates(const DeviceToleration& t, const DeviceTaint& taint) {
  if (!t.effect.empty() && t.effect != TaintEffectName(taint.effect)) return false;
  if (!t.key.empty() && t.key != taint.key) return false;
  if (t.op.empty() || t.op == "Equal") return t.value == taint.value;
  return t.op == "Exists";
}

bool KeepsAway(const DeviceTaint& taint, const std::vector<DeviceToleration>& tolerations) {
  if (taint.effect == TaintEffect::kNone) return false;
  for (const DeviceToleration& t : tolerations) {
    if (Tolerates(t, taint)) return false;
  }
  return true;
}

std::string TaintString(const DeviceTaint& taint) {
  return StrCat(taint.key, taint.value.empty() ? "" : "=", taint.value, ":",
                TaintEffectName(taint.effect));
}

}  // namespace gpu_agent::dra
