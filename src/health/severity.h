// How bad a GPU's standing is, in the same three steps everywhere: a polled
// check's configured severity, a GPU's standing on a check as the poller
// judged it, and what the Node's events and GpuHealthy condition say.
#ifndef GPU_AGENT_HEALTH_SEVERITY_H_
#define GPU_AGENT_HEALTH_SEVERITY_H_

#include <optional>
#include <string_view>

namespace gpu_agent::health {

// As a check's configured severity, what a failing check does to its GPU.
// kUnhealthy: out of the allocatable set, as a reset-class XID; kDegraded:
// still allocatable, but shown (events, Node condition, metrics); kOk
// ("ignore"): shown only in the report.
enum class Severity { kOk, kDegraded, kUnhealthy };

// A standing: "ok", "degraded", "unhealthy" (logs, events, the condition).
std::string_view SeverityName(Severity s);

// As health.checks.<name>.severity says it: "ignore" (kOk), "degraded",
// "unhealthy"; Parse takes those words only.
std::string_view SeveritySettingName(Severity s);
std::optional<Severity> ParseSeveritySetting(std::string_view name);

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_SEVERITY_H_
