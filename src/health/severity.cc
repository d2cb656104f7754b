#include "health/severity.h"

namespace gpu_agent::health {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "ok";
    case Severity::kDegraded:
      return "degraded";
    case Severity::kUnhealthy:
      return "unhealthy";
  }
  return "ok";
}

std::string_view SeveritySettingName(Severity s) {
  return s == Severity::kOk ? "ignore" : SeverityName(s);
}

std::optional<Severity> ParseSeveritySetting(std::string_view name) {
  if (name == "ignore") return Severity::kOk;
  if (name == "degraded") return Severity::kDegraded;
  if (name == "unhealthy") return Severity::kUnhealthy;
  return std::nullopt;
}

}  // namespace gpu_agent::health
