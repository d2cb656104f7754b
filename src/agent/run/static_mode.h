// Static mode: keeps nvidia.com/gpu (healthy GPUs x replicas) in this Node's
// status.capacity and status.allocatable until SIGTERM/SIGINT; a reload
// (SIGHUP, the node's config label) keeps the next generation's counts.
#ifndef GPU_AGENT_AGENT_RUN_STATIC_MODE_H_
#define GPU_AGENT_AGENT_RUN_STATIC_MODE_H_

#include <memory>

#include "agent/plan/generation.h"
#include "agent/run/mode_context.h"
#include "agent/run/mode_runner.h"

namespace gpu_agent {

// Keeps the counts of `gen` (built for static mode), then of each reloaded
// generation. Returns the exit code.
ModeEnd RunStaticMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_STATIC_MODE_H_
