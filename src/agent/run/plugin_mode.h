// Plugin mode: serves the kubelet device-plugin API for the node's GPUs until
// SIGTERM/SIGINT; a reload (SIGHUP, the node's config label) serves the next
// generation and re-registers.
#ifndef GPU_AGENT_AGENT_RUN_PLUGIN_MODE_H_
#define GPU_AGENT_AGENT_RUN_PLUGIN_MODE_H_

#include <memory>

#include "agent/plan/generation.h"
#include "agent/run/mode_context.h"
#include "agent/run/mode_runner.h"

namespace gpu_agent {

// Serves `gen` (built for plugin mode), then each reloaded generation.
// Returns the exit code.
ModeEnd RunPluginMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_PLUGIN_MODE_H_
