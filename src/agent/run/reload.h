// Choosing and re-reading the config while the agent runs: the node's named
// config at start, and the reload (config again, GPUs re-discovered, the next
// generation built).
#ifndef GPU_AGENT_AGENT_RUN_RELOAD_H_
#define GPU_AGENT_AGENT_RUN_RELOAD_H_

#include <functional>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "agent/config/config_loader.h"
#include "agent/config/node_config.h"
#include "agent/plan/generation.h"
#include "agent/run/run_events.h"
#include "apiserver/node_label_watch.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

// nodeConfig.dir set: checks the settings, reads the node's config label
// (one GET; a failure is logged and the label counts as unknown until the
// watch sees it) and replaces `loaded` with the config it chooses. Null,
// leaving `loaded` alone, when nodeConfig.dir is empty. An error is a bad
// setting, already naming it.
absl::StatusOr<std::unique_ptr<NodeConfigSelector>> StartNodeConfig(const ConfigRequest& request,
                                                                    LoadedConfig* loaded);

// The config a reload asks for: through `node_config` when there is one (the
// node's label chooses the file), else the --config file, env and flags.
absl::StatusOr<LoadedConfig> LoadConfigAgain(const ConfigRequest& request,
                                             NodeConfigSelector* node_config);

// A value of the node's config label seen by a watch (nullopt: no such
// label): handed to `node_config`, and a reload posted to `events` when it
// changed. Called on the watch's thread.
void ObserveConfigLabel(NodeConfigSelector* node_config, RunEvents* events,
                        const std::optional<std::string>& value);

// The watch of the node's config label that feeds `node_config` (through
// ObserveConfigLabel): plugin and DRA mode's. Null without a node config.
absl::StatusOr<std::unique_ptr<apiserver::NodeLabelWatch>> WatchConfigLabel(
    const Config& config, NodeConfigSelector* node_config, RunEvents* events);

// On a reload (SIGHUP, or the node's config label changed): loads the config
// again (through `node_config` when there is one, so the node's label
// chooses the file; settings that need a restart keep their running values,
// with a warning), re-discovers the GPUs when NVML is there and builds the
// next generation as the running one was built (GenerationOptionsFor its
// mode). Null, after logging why, when the running generation should stay.
// A GPU off the bus answers GPU_IS_LOST even for its handle, so re-discovery
// cannot read its UUID; it keeps what the running inventory knew of it,
// marked lost, so it stays advertised (unhealthy) and returns when it is
// reset, instead of leaving the node until the agent restarts.
std::shared_ptr<const Generation> ReloadGeneration(
    const ConfigRequest& request, const Generation& running,
    const std::shared_ptr<const nvml::NvmlLibrary>& lib, NodeConfigSelector* node_config,
    const std::string& reason);

// Waits on `events` (SIGUSR1 calls `on_vouch`) and, on each reload asked
// for, returns the next generation (ReloadGeneration). One that cannot be
// built is logged, the running one stays and the wait goes on. Null on stop.
std::shared_ptr<const Generation> NextGeneration(
    RunEvents& events, const ConfigRequest& request, const Generation& running,
    const std::shared_ptr<const nvml::NvmlLibrary>& lib, NodeConfigSelector* node_config,
    const std::function<void()>& on_vouch);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_RELOAD_H_
