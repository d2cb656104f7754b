// What a mode of `run` runs with, the same from its start to its stop.
#ifndef GPU_AGENT_AGENT_RUN_MODE_CONTEXT_H_
#define GPU_AGENT_AGENT_RUN_MODE_CONTEXT_H_

#include <memory>
#include <string>

#include "agent/config/config_loader.h"
#include "agent/config/node_config.h"
#include "agent/run/mode_condition.h"
#include "agent/run/run_events.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

struct ModeContext {
  const ConfigRequest& request;  // what a reload loads again
  // The NVML the inventory came from (run waits for one before a mode
  // starts); a null one would mean no re-discovery and no health watcher.
  std::shared_ptr<const nvml::NvmlLibrary> lib;
  // Null, or the per-node config, which outlives the mode; a watch of the
  // Node feeds it the label and asks `events` for a reload when it changes.
  NodeConfigSelector* node_config;
  RunEvents* events;  // signals and posted reloads; main thread only reads it
  // The mode this one took the node over from in this process ("plugin",
  // "dra"); empty when it is the first (mode_switch.h).
  std::string switched_from;
  // The Node's GpuAgentMode condition, written while the node moves between
  // modes (mode_condition.h); null without a node config, which is what
  // moves a node.
  ModeCondition* mode_condition = nullptr;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_MODE_CONTEXT_H_
