#include "agent/plugin_mode.h"

#include <signal.h>

#include "agent/commands.h"
#include "agent/mode_common.h"
#include "agent/plugin_plan.h"
#include "agent/signals.h"
#include "base/log.h"
#include "base/strings.h"
#include "deviceplugin/plugin_supervisor.h"
#include "nvml/health_watcher.h"

namespace gpu_agent {
namespace {

using deviceplugin::DevicePublisher;
using deviceplugin::ResourceRuntime;

struct Running {
  std::vector<ResourceRuntime> runtimes;
  std::unique_ptr<nvml::HealthWatcher> health;
};

std::vector<ResourceRuntime> MakeRuntimes(const PluginPlan& plan) {
  auto allocator = std::make_shared<const deviceplugin::Allocator>(plan.allocate);
  std::vector<ResourceRuntime> out;
  for (const deviceplugin::ResourceSpec& spec : plan.resources) {
    LogInfo("advertising resource", {{"resource", spec.resource_name},
                                     {"devices", StrCat(spec.devices.size())},
                                     {"endpoint", spec.endpoint}});
    out.push_back({std::make_shared<DevicePublisher>(spec), allocator});
  }
  return out;
}

std::unique_ptr<nvml::HealthWatcher> WatchHealth(
    const std::shared_ptr<const nvml::NvmlLibrary>& lib, const Config& config,
    const PluginPlan& plan, const std::vector<ResourceRuntime>& runtimes) {
  if (!lib) return nullptr;
  std::vector<std::shared_ptr<DevicePublisher>> publishers;
  for (const ResourceRuntime& r : runtimes) publishers.push_back(r.publisher);
  return nvml::HealthWatcher::Start(lib, plan.gpu_uuids, plan.initially_unhealthy,
                                    HealthPolicyFrom(config),
                                    [publishers](const nvml::HealthChange& change) {
                                      for (const auto& p : publishers)
                                        p->SetHealth(change.uuid, change.healthy);
                                    });
}

deviceplugin::SupervisorOptions SupervisorFrom(const Config& c) {
  deviceplugin::SupervisorOptions o;
  o.kubelet_socket = c.kubelet.socket;
  return o;
}

}  // namespace

int RunPluginMode(const ConfigRequest& request, LoadedConfig loaded,
                  std::shared_ptr<const nvml::NvmlLibrary> lib, nvml::Inventory inventory) {
  absl::StatusOr<PluginPlan> plan = PlanPlugin(loaded.config, inventory);
  if (!plan.ok()) {
    LogError("cannot plan the device plugin", {{"error", std::string(plan.status().message())}});
    return kExitUsage;
  }
  Running running;
  running.runtimes = MakeRuntimes(*plan);
  // Health first: by the time the kubelet sees a device, its XIDs count.
  running.health = WatchHealth(lib, loaded.config, *plan, running.runtimes);
  absl::StatusOr<std::unique_ptr<deviceplugin::PluginSupervisor>> sup =
      deviceplugin::PluginSupervisor::Start(SupervisorFrom(loaded.config), running.runtimes);
  if (!sup.ok()) {
    LogError("cannot start the device plugin", {{"error", std::string(sup.status().message())}});
    return kExitFailure;
  }

  for (;;) {
    const int sig = WaitForSignal();
    if (sig != SIGHUP) {
      LogInfo("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      break;
    }
    std::optional<Reloaded> next = ReloadForSighup(request, loaded.config, lib);
    if (!next) continue;
    absl::StatusOr<PluginPlan> next_plan = PlanPlugin(next->loaded.config, next->inventory);
    if (!next_plan.ok()) {
      LogError("reloaded config cannot be served; keeping the running one",
               {{"error", std::string(next_plan.status().message())}});
      continue;
    }
    if (running.health) running.health->Stop();
    std::vector<ResourceRuntime> runtimes = MakeRuntimes(*next_plan);
    running.health = WatchHealth(lib, next->loaded.config, *next_plan, runtimes);
    if (absl::Status s = (*sup)->Reload(runtimes); !s.ok()) {
      LogError("serving the reloaded resources failed", {{"error", std::string(s.message())}});
    }
    running.runtimes = std::move(runtimes);
    LogInfo("reload done", {{"gpus", StrCat(next->inventory.gpus.size())}});
    loaded = std::move(next->loaded);
  }
  if (running.health) running.health->Stop();
  (*sup)->Stop();
  LogInfo("stopped; sockets removed");
  return kExitOk;
}

}  // namespace gpu_agent
