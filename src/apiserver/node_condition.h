// A condition of a Node's status, as a strategic merge patch of
// /api/v1/nodes/<node>/status: conditions merge by `type`, so a patch with
// one condition sets that one and leaves the kubelet's alone. Times are
// RFC 3339 (Rfc3339Now).
#ifndef GPU_AGENT_APISERVER_NODE_CONDITION_H_
#define GPU_AGENT_APISERVER_NODE_CONDITION_H_

#include <string>

namespace gpu_agent::apiserver {

struct NodeCondition {
  std::string type;    // "GpuHealthy", "GpuAgentMode"
  std::string status;  // "True", "False", "Unknown"
  std::string reason;  // UpperCamelCase
  std::string message;
  std::string heartbeat;   // lastHeartbeatTime
  std::string transition;  // lastTransitionTime
};

inline constexpr const char* kStrategicMergePatch = "application/strategic-merge-patch+json";

// {"status":{"conditions":[{...}]}}
std::string NodeConditionPatch(const NodeCondition& condition);

// The time now, UTC, to the second: "2026-11-28T15:40:00Z".
std::string Rfc3339Now();

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_NODE_CONDITION_H_
