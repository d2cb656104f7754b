// The node config at start and the SIGHUP reload steps.
#include "agent/run/reload.h"

#include <string>
#include <utility>

#include "agent/config/api_connection.h"
#include "apiserver/connection.h"
#include "apiserver/node_client.h"
#include "apiserver/node_label_watch.h"
#include "apiserver/rest_client.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/version.h"

namespace gpu_agent {

absl::StatusOr<std::unique_ptr<NodeConfigSelector>> StartNodeConfig(const ConfigRequest& request,
                                                                    LoadedConfig* loaded) {
  if (loaded->config.node_config.dir.empty()) return std::unique_ptr<NodeConfigSelector>();
  absl::StatusOr<std::unique_ptr<NodeConfigSelector>> selector =
      NodeConfigSelector::Create(*loaded);
  if (!selector.ok()) return selector.status();
  const Config& c = loaded->config;
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(c);
  if (!conn.ok()) {
    return absl::InvalidArgumentError(
        StrCat("nodeConfig.dir needs the API server, to read the node's ", c.node_config.label,
               " label: ", conn.status().message()));
  }
  absl::StatusOr<std::unique_ptr<apiserver::RestClient>> client =
      apiserver::RestClient::Create(*conn, RestOptionsFor(c));
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

absl::StatusOr<LoadedConfig> LoadConfigAgain(const ConfigRequest& request,
                                             NodeConfigSelector* node_config) {
  return node_config ? node_config->Load(request, /*at_start=*/false) : LoadConfig(request);
}

void ObserveConfigLabel(NodeConfigSelector* node_config, RunEvents* events,
                        const std::optional<std::string>& value) {
  if (node_config->Observe(value)) events->PostReload("the node's config label changed");
}

std::shared_ptr<const Generation> ReloadGeneration(
    const ConfigRequest& request, const Generation& running_generation,
    const std::shared_ptr<const nvml::NvmlLibrary>& lib, NodeConfigSelector* node_config,
    const std::string& reason) {
  const Config& running = running_generation.config();
  const nvml::Inventory& running_inventory = running_generation.inventory;
  LogInfo(StrCat(reason, ": reloading config and re-discovering GPUs"));
  absl::StatusOr<LoadedConfig> next = LoadConfigAgain(request, node_config);
  if (!next.ok()) {
    LogError("config reload failed; keeping the running config",
             {{"error", std::string(next.status().message())}});
    return nullptr;
  }
  // Plugin and DRA mode hand the node to each other in this process
  // (mode_switch.h); static mode comes and goes with a restart.
  const bool handover = next->config.mode != running.mode &&
                        next->config.agent_mode() != AgentMode::kStatic &&
                        running.agent_mode() != AgentMode::kStatic;
  if (!handover &&
      (next->config.mode != running.mode || next->config.kubelet.socket != running.kubelet.socket ||
       next->config.kubelet.stream_grace_period != running.kubelet.stream_grace_period)) {
    LogWarning(
        "a change to or from static mode, and kubelet.socket and kubelet.streamGracePeriod "
        "changes, take effect only after a restart");
    next->config.mode = running.mode;
    next->config.kubelet.socket = running.kubelet.socket;
    next->config.kubelet.stream_grace_period = running.kubelet.stream_grace_period;
  }
  nvml::Inventory inventory;
  if (lib) {
    absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(*lib, next->config.sysfs_root);
    if (!inv.ok()) {
      LogError("re-discovery failed; keeping the running state",
               {{"error", std::string(inv.status().message())}});
      return nullptr;
    }
    inventory = *std::move(inv);
    for (nvml::GpuRecord& g : inventory.gpus) {
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
  const GenerationOptions options = GenerationOptionsFor(next->config);
  absl::StatusOr<std::shared_ptr<const Generation>> gen =
      BuildGeneration(*std::move(next), std::move(inventory), options);
  if (!gen.ok()) {
    LogError("reloaded config cannot be served; keeping the running one",
             {{"error", std::string(gen.status().message())}});
    return nullptr;
  }
  return *std::move(gen);
}

std::shared_ptr<const Generation> NextGeneration(
    RunEvents& events, const ConfigRequest& request, const Generation& running,
    const std::shared_ptr<const nvml::NvmlLibrary>& lib, NodeConfigSelector* node_config,
    const std::function<void()>& on_vouch) {
  for (;;) {
    const RunEvents::Event e = events.Next();
    switch (e.kind) {
      case RunEvents::Kind::kStop:
        LogInfo("shutting down", {{"signal", e.reason}});
        return nullptr;
      case RunEvents::Kind::kVouch:
        on_vouch();
        break;
      case RunEvents::Kind::kReload:
        if (std::shared_ptr<const Generation> next =
                ReloadGeneration(request, running, lib, node_config, e.reason)) {
          return next;
        }
        break;
    }
  }
}

absl::StatusOr<std::unique_ptr<apiserver::NodeLabelWatch>> WatchConfigLabel(
    const Config& config, NodeConfigSelector* node_config, RunEvents* events) {
  if (!node_config) return std::unique_ptr<apiserver::NodeLabelWatch>();
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  if (!conn.ok()) return conn.status();
  apiserver::NodeLabelWatchOptions o;
  o.node = config.node_name;
  o.label = node_config->settings().label;
  o.watch_timeout = config.static_mode.watch_timeout;
  o.rest = RestOptionsFor(config);
  return apiserver::NodeLabelWatch::Start(
      *conn, o, [node_config, events](const std::optional<std::string>& v) {
        ObserveConfigLabel(node_config, events, v);
      });
}

}  // namespace gpu_agent
