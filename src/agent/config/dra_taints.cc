#include "agent/config/dra_taints.h"

#include "health/health_check_catalog.h"

namespace gpu_agent {

std::vector<std::string> DraTaintCauses() {
  std::vector<std::string> out = {"lost", "xid"};
  for (const std::string& name : health::CheckNames()) out.push_back(name);
  return out;
}

std::string DraTaintEffect(const Config& config, std::string_view cause) {
  if (auto it = config.dra.taints.find(std::string(cause)); it != config.dra.taints.end()) {
    return it->second;
  }
  if (cause == "lost") return "NoExecute";
  if (cause == "xid") return "NoSchedule";
  const health::CheckSpec* spec = health::FindCheck(cause);
  if (spec == nullptr) return "NoSchedule";
  if (spec->id == health::CheckId::kRecoveryAction) return "NoExecute";
  switch (config.health.checks[spec->id].severity) {
    case health::Severity::kUnhealthy:
      return "NoSchedule";
    case health::Severity::kDegraded:
      return "None";
    case health::Severity::kOk:
      return "off";
  }
  return "NoSchedule";
}

}  // namespace gpu_agent
