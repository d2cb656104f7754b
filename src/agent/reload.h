// Choosing and re-reading the config while the agent runs: the node's named
// config at start, and the SIGHUP reload (config again, GPUs re-discovered).
#ifndef GPU_AGENT_AGENT_RELOAD_H_
#define GPU_AGENT_AGENT_RELOAD_H_

#include <functional>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "agent/config_loader.h"
#include "agent/node_config.h"
#include "agent/resource_plan.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

struct Reloaded {
  LoadedConfig loaded;
  nvml::Inventory inventory;
};

// nodeConfig.dir set: checks the settings, reads the node's config label
// (one GET; a failure is logged and the label counts as unknown until the
// watch sees it) and replaces `loaded` with the config it chooses. Null,
// leaving `loaded` alone, when nodeConfig.dir is empty. An error is a bad
// setting, already naming it.
absl::StatusOr<std::unique_ptr<NodeConfigSelector>> StartNodeConfig(const ConfigRequest& request,
                                                                    LoadedConfig* loaded);

// On SIGHUP: loads the config again (through `node_config` when there is
// one, so the node's label chooses the file; settings that need a restart keep
// their running values, with a warning) and re-discovers the GPUs when NVML
// is there. nullopt, after logging why, when the running state should stay.
// `running_inventory`: what the running generation was planned from. A GPU
// off the bus answers GPU_IS_LOST even for its handle, so re-discovery
// cannot read its UUID; it keeps what the running inventory knew of it,
// marked lost, so it stays advertised (unhealthy) and returns when it is
// reset, instead of leaving the node until the agent restarts.
std::optional<Reloaded> ReloadForSighup(const ConfigRequest& request, const Config& running,
                                        const nvml::Inventory& running_inventory,
                                        const std::shared_ptr<const nvml::NvmlLibrary>& lib,
                                        NodeConfigSelector* node_config);

// A generation a SIGHUP asked for, with its resource plan.
struct PlannedReload {
  Reloaded next;
  ResourcePlan plan;
};

// Waits for signals (WaitForReloadOrStop; SIGUSR1 calls `on_sigusr1`) and,
// on each SIGHUP, loads what it asks for (ReloadForSighup) and plans it: what
// plugin mode would serve (`serving`), or only what it would advertise. A
// generation that cannot load or cannot be planned is logged and the running
// one stays; the wait goes on. nullopt on SIGTERM or SIGINT.
std::optional<PlannedReload> NextReload(const ConfigRequest& request, const Config& running,
                                        const nvml::Inventory& running_inventory,
                                        const std::shared_ptr<const nvml::NvmlLibrary>& lib,
                                        NodeConfigSelector* node_config, bool serving,
                                        const std::function<void()>& on_sigusr1);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RELOAD_H_
