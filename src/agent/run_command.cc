#include "agent/run_command.h"

#include <cstdio>
#include <mutex>

#include "agent/driver_wait.h"
#include "agent/exit_code.h"
#include "agent/metrics_server.h"
#include "agent/nvml_start.h"
#include "agent/plugin_mode.h"
#include "agent/reload.h"
#include "agent/signals.h"
#include "agent/static_mode.h"
#include "base/log.h"
#include "base/strings.h"
#include "nvml/inventory.h"

namespace gpu_agent {
namespace {

// failOnInitError false and no NVML: serve /readyz (not ready, saying why)
// and wait for a signal. SIGHUP retries NVML; SIGTERM/SIGINT end the wait
// with kCancelled.
absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> WaitWithoutNvml(const Config& config,
                                                                   absl::Status error) {
  std::mutex mu;
  std::string why;
  auto set_why = [&](const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    why = StrCat("NVML did not start (", s.message(),
                 "); failOnInitError is false: waiting without registering (SIGHUP retries)");
  };
  set_why(error);
  MetricsServer::Handlers handlers;
  handlers.metrics = [] { return std::string(); };
  handlers.ready = [&](std::string* out) {
    std::lock_guard<std::mutex> lock(mu);
    *out = why;
    return false;
  };
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
      StartMetricsIfConfigured(config, std::move(handlers));
  if (!metrics.ok()) return metrics.status();
  for (;;) {
    LogWarning(
        "cannot start NVML; failOnInitError is false: waiting without registering any resource "
        "(the node's capacity is left as it is); send SIGHUP to try again",
        {{"error", std::string(error.message())}});
    if (!WaitForReloadOrStop([] {})) {
      if (*metrics) (*metrics)->Stop();
      return absl::CancelledError("stopped while waiting for NVML");
    }
    absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> opened = StartNvml(config);
    if (opened.ok()) {
      if (*metrics) (*metrics)->Stop();
      LogInfo("NVML started after SIGHUP");
      return opened;
    }
    error = opened.status();
    set_why(error);
  }
}

}  // namespace

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
    return node_config.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                             : kExitFailure;
  }
  const Config& config = loaded.config;
  for (const std::string& w : loaded.warnings) LogWarning(w);
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
    // As NVIDIA's plugin: block without registering, so the node's
    // capacity is left as it is. SIGHUP tries again.
    opened = WaitWithoutNvml(config, opened.status());
    if (!opened.ok())
      return opened.status().code() == absl::StatusCode::kCancelled ? kExitOk : kExitFailure;
  }
  {
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
  if (config.mode == "static") {
    return RunStaticMode(request, std::move(loaded), std::move(lib), std::move(inventory),
                         node_config->get());
  }
  return RunPluginMode(request, std::move(loaded), std::move(lib), std::move(inventory),
                       node_config->get());
}

}  // namespace gpu_agent
