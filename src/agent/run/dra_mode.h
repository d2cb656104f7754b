// DRA mode: serves the kubelet's Dynamic Resource Allocation plugin API for
// the node's GPUs (Kubernetes 1.34+): registration, prepare and unprepare of
// ResourceClaims as CDI specs, the health stream. A reload serves the next
// generation's devices.
#ifndef GPU_AGENT_AGENT_RUN_DRA_MODE_H_
#define GPU_AGENT_AGENT_RUN_DRA_MODE_H_

#include <memory>

#include "agent/plan/generation.h"
#include "agent/run/mode_context.h"
#include "agent/run/mode_runner.h"

namespace gpu_agent {

// Serves `gen` (built for DRA mode), then each reloaded generation.
// Returns the exit code.
ModeEnd RunDraMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_DRA_MODE_H_
