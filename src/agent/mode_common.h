// What plugin mode, static mode and the one-shot commands share: the health
// policy and API server connection built from the config, and the SIGHUP
// steps (re-read the config, re-discover the GPUs).
#ifndef GPU_AGENT_AGENT_MODE_COMMON_H_
#define GPU_AGENT_AGENT_MODE_COMMON_H_

#include <functional>
#include <memory>
#include <optional>

#include "agent/config_loader.h"
#include "agent/node_config.h"
#include "apiserver/connection.h"
#include "apiserver/rest_client.h"
#include "nvml/health_watcher.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

nvml::HealthPolicy HealthPolicyFrom(const Config& config);
apiserver::ConnectionOptions ConnectionOptionsFrom(const Config& config);

// The API server client of a one-shot command (capacity, labels): the
// config's connection, its request timeout bounding connects too. On a
// failure, `*exit_code` is how to exit: kExitUsage for a setting in error.
absl::StatusOr<std::unique_ptr<apiserver::RestClient>> CommandRestClient(const Config& config,
                                                                         int* exit_code);

// Waits for a signal: true for SIGHUP (reload), false for SIGTERM or SIGINT
// (after logging which). SIGUSR1 (an operator vouching that GPUs held for a
// reset were reset) calls `on_sigusr1` and waits on.
bool WaitForReloadOrStop(const std::function<void()>& on_sigusr1);

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

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_MODE_COMMON_H_
