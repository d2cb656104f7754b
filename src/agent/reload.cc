// The node config at start and the SIGHUP reload steps.
#include "agent/reload.h"

#include <string>
#include <utility>

#include "agent/api_connection.h"
#include "agent/signals.h"
#include "agent/version.h"
#include "apiserver/connection.h"
#include "apiserver/node_client.h"
#include "apiserver/rest_client.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {

absl::StatusOr<std::unique_ptr<NodeConfigSelector>> StartNodeConfig(const ConfigRequest& request,
                                                                    LoadedConfig* loaded) {
  if (loaded->config.node_config.dir.empty()) return std::unique_ptr<NodeConfigSelector>();
  absl::StatusOr<std::unique_ptr<NodeConfigSelector>> selector =
      NodeConfigSelector::Create(*loaded);
  if (!selector.ok()) return selector.status();
  const Config& c = loaded->config;
  absl::StatusOr<apiserver::Connection> conn =
      apiserver::ResolveConnection(ConnectionOptionsFrom(c), ProcessEnv());
  if (!conn.ok()) {
    return absl::InvalidArgumentError(
        StrCat("nodeConfig.dir needs the API server, to read the node's ", c.node_config.label,
               " label: ", conn.status().message()));
  }
  apiserver::RestOptions rest;
  rest.user_agent = StrCat("gpu-agent/", kVersion);
  rest.read_timeout = c.api_server.request_timeout;
  absl::StatusOr<std::unique_ptr<apiserver::RestClient>> client =
      apiserver::RestClient::Create(*conn, rest);
  if (!client.ok()) return client.status();
  apiserver::NodeClient node(client->get(), c.node_name);
  if (absl::StatusOr<apiserver::NodeView> view = node.Get(); view.ok()) {
    auto it = view->labels.find(c.node_config.label);
    (*selector)->SetInitialLabel(it == view->labels.end() ? std::nullopt
                                                          : std::optional<std::string>(it->second));
  } else {
    LogWarning("cannot read the node's config label; starting without it until the watch sees it",
               {{"node", c.node_name},
                {"label", c.node_config.label},
                {"error", std::string(view.status().message())}});
  }
  absl::StatusOr<LoadedConfig> chosen = (*selector)->Load(request, /*at_start=*/true);
  if (!chosen.ok()) return chosen.status();
  *loaded = *std::move(chosen);
  return selector;
}

std::optional<Reloaded> ReloadForSighup(const ConfigRequest& request, const Config& running,
                                        const nvml::Inventory& running_inventory,
                                        const std::shared_ptr<const nvml::NvmlLibrary>& lib,
                                        NodeConfigSelector* node_config) {
  LogInfo("SIGHUP: reloading config and re-discovering GPUs");
  absl::StatusOr<LoadedConfig> next =
      node_config ? node_config->Load(request, /*at_start=*/false) : LoadConfig(request);
  if (!next.ok()) {
    LogError("config reload failed; keeping the running config",
             {{"error", std::string(next.status().message())}});
    return std::nullopt;
  }
  if (next->config.mode != running.mode || next->config.kubelet.socket != running.kubelet.socket ||
      next->config.kubelet.stream_grace_period != running.kubelet.stream_grace_period) {
    LogWarning(
        "mode, kubelet.socket and kubelet.streamGracePeriod changes take effect only after a "
        "restart");
    next->config.mode = running.mode;
    next->config.kubelet.socket = running.kubelet.socket;
    next->config.kubelet.stream_grace_period = running.kubelet.stream_grace_period;
  }
  Reloaded out;
  if (lib) {
    absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(*lib, next->config.sysfs_root);
    if (!inv.ok()) {
      LogError("re-discovery failed; keeping the running state",
               {{"error", std::string(inv.status().message())}});
      return std::nullopt;
    }
    out.inventory = *std::move(inv);
    for (nvml::GpuRecord& g : out.inventory.gpus) {
      if (!g.uuid.empty() || !g.lost) continue;
      for (const nvml::GpuRecord& known : running_inventory.gpus) {
        if (known.index != g.index || known.uuid.empty()) continue;
        LogWarning("GPU is off the bus; keeping it advertised, unhealthy, as it was known",
                   {{"index", StrCat(g.index)}, {"uuid", known.uuid}, {"error", g.error}});
        std::string error = std::move(g.error);
        g = known;
        g.lost = true;
        g.error = std::move(error);
        break;
      }
    }
  }
  out.loaded = *std::move(next);
  return out;
}

std::optional<PlannedReload> NextReload(const ConfigRequest& request, const Config& running,
                                        const nvml::Inventory& running_inventory,
                                        const std::shared_ptr<const nvml::NvmlLibrary>& lib,
                                        NodeConfigSelector* node_config, bool serving,
                                        const std::function<void()>& on_sigusr1) {
  while (WaitForReloadOrStop(on_sigusr1)) {
    std::optional<Reloaded> next =
        ReloadForSighup(request, running, running_inventory, lib, node_config);
    if (!next) continue;
    absl::StatusOr<ResourcePlan> plan = serving
                                            ? PlanResources(next->loaded.config, next->inventory)
                                            : PlanAdvertised(next->loaded.config, next->inventory);
    if (!plan.ok()) {
      LogError("reloaded config cannot be served; keeping the running one",
               {{"error", std::string(plan.status().message())}});
      continue;
    }
    return PlannedReload{*std::move(next), *std::move(plan)};
  }
  return std::nullopt;
}

}  // namespace gpu_agent
