#include "agent/run/run_command.h"

#include <cstdio>

#include "agent/plan/generation.h"
#include "agent/run/driver_wait.h"
#include "agent/run/plugin_mode.h"
#include "agent/run/reload.h"
#include "agent/run/run_events.h"
#include "agent/run/signals.h"
#include "agent/run/static_mode.h"
#include "base/exit_code.h"
#include "base/log.h"
#include "base/strings.h"
#include "nvml/inventory.h"

namespace gpu_agent {

int RunCommand(const ConfigRequest& request, LoadedConfig loaded) {
  // Before NVML or gRPC start any thread, so every thread inherits the mask.
  BlockShutdownSignals();
  // The node's named config, before NVML: it may set where the driver is.
  absl::StatusOr<std::unique_ptr<NodeConfigSelector>> node_config =
      StartNodeConfig(request, &loaded);
  if (!node_config.ok()) {
    // As every other config error is reported: the message as it is.
    std::fprintf(stderr, "gpu-agent: config error: %s\n",
                 std::string(node_config.status().message()).c_str());
    return ExitCodeFor(node_config.status());
  }
  const Config& config = loaded.config;
  for (const std::string& note : loaded.notes) LogInfo(note);
  std::shared_ptr<const nvml::NvmlLibrary> lib;
  nvml::Inventory inventory;
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> opened = StartNvmlWaitingForDriver(config);
  if (!opened.ok() && opened.status().code() == absl::StatusCode::kCancelled) return kExitOk;
  if (!opened.ok()) {
    if (config.flags.fail_on_init_error) {
      LogError("cannot start NVML; exiting because failOnInitError is true",
               {{"error", std::string(opened.status().message())}});
      return kExitFailure;
    }
    LogWarning("cannot start NVML; running with 0 devices because failOnInitError is false",
               {{"error", std::string(opened.status().message())}});
  } else {
    lib = std::move(*opened);
    absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(*lib, config.sysfs_root);
    if (!inv.ok()) {
      LogError("GPU discovery failed", {{"error", std::string(inv.status().message())}});
      if (config.flags.fail_on_init_error) return kExitFailure;
    } else {
      inventory = *std::move(inv);
    }
  }
  LogInfo("GPUs discovered", {{"count", StrCat(inventory.gpus.size())},
                              {"driver", inventory.driver_version},
                              {"mode", config.mode}});
  if (inventory.gpus.empty()) LogWarning("no GPUs found: advertising 0 devices");
  const GenerationOptions options = GenerationOptionsFor(config);
  absl::StatusOr<std::shared_ptr<const Generation>> gen =
      BuildGeneration(std::move(loaded), std::move(inventory), options);
  if (!gen.ok()) {
    LogError("the config cannot be served on this node",
             {{"error", std::string(gen.status().message())}});
    return ExitCodeFor(gen.status());
  }
  for (const std::string& w : (*gen)->warnings) LogWarning(w);
  absl::StatusOr<std::unique_ptr<RunEvents>> events = RunEvents::Create();
  if (!events.ok()) {
    LogError("cannot wait for signals", {{"error", std::string(events.status().message())}});
    return kExitFailure;
  }
  ModeContext ctx{request, std::move(lib), node_config->get(), events->get()};
  if ((*gen)->config().mode == "static") return RunStaticMode(ctx, *std::move(gen));
  return RunPluginMode(ctx, *std::move(gen));
}

}  // namespace gpu_agent
