#include "agent/run/run_command.h"

#include <cstdio>
#include <mutex>

#include "agent/plan/generation.h"
#include "agent/plan/nvml_start.h"
#include "agent/run/dra_mode.h"
#include "agent/run/driver_wait.h"
#include "agent/run/metrics_server.h"
#include "agent/run/mode_runner.h"
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
namespace {

const char* ModeName(AgentMode m) {
  return m == AgentMode::kDra ? "dra" : m == AgentMode::kStatic ? "static" : "plugin";
}

// failOnInitError false and no NVML: serve /readyz (not ready, saying why)
// and wait on `events`. A reload loads the config again into `*loaded` (a
// fixed driver root is what most often mends it) and retries NVML; a stop
// ends the wait with kCancelled.
absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> WaitWithoutNvml(const ConfigRequest& request,
                                                                   NodeConfigSelector* node_config,
                                                                   LoadedConfig* loaded,
                                                                   absl::Status error,
                                                                   RunEvents& events) {
  const Config& config = loaded->config;
  std::mutex mu;
  std::string why;
  auto set_why = [&](const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    why = StrCat("NVML did not start (", s.message(),
                 "); failOnInitError is false: waiting without registering (SIGHUP retries)");
  };
  set_why(error);
  MetricsServer::Handlers handlers;
  handlers.metrics = [mode = config.mode] {
    PromText p;
    RenderBuildInfo(&p, mode);
    return p.str();
  };
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
    RunEvents::Event e = events.Next();
    while (e.kind == RunEvents::Kind::kVouch) e = events.Next();
    if (e.kind == RunEvents::Kind::kStop) {
      LogInfo("shutting down", {{"signal", e.reason}});
      if (*metrics) (*metrics)->Stop();
      return absl::CancelledError("stopped while waiting for NVML");
    }
    absl::StatusOr<LoadedConfig> next = LoadConfigAgain(request, node_config);
    if (next.ok()) {
      *loaded = *std::move(next);
      for (const std::string& w : loaded->warnings) LogWarning(w);
    } else {
      LogError("config reload failed; retrying NVML with the config started with",
               {{"error", std::string(next.status().message())}});
    }
    absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> opened = StartNvml(loaded->config);
    if (opened.ok()) {
      if (*metrics) (*metrics)->Stop();
      LogInfo(StrCat("NVML started after ", e.reason));
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
    return ExitCodeFor(node_config.status());
  }
  const Config& config = loaded.config;
  for (const std::string& w : loaded.warnings) LogWarning(w);
  for (const std::string& note : loaded.notes) LogInfo(note);
  absl::StatusOr<std::unique_ptr<RunEvents>> events = RunEvents::Create();
  if (!events.ok()) {
    LogError("cannot wait for signals", {{"error", std::string(events.status().message())}});
    return kExitFailure;
  }
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
    opened = WaitWithoutNvml(request, node_config->get(), &loaded, opened.status(), **events);
    if (!opened.ok()) {
      return opened.status().code() == absl::StatusCode::kCancelled ? kExitOk : kExitFailure;
    }
  }
  lib = std::move(*opened);
  absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(*lib, config.sysfs_root);
  if (!inv.ok()) {
    LogError("GPU discovery failed", {{"error", std::string(inv.status().message())}});
    if (config.flags.fail_on_init_error) return kExitFailure;
  } else {
    inventory = *std::move(inv);
  }
  LogInfo("GPUs discovered", {{"count", StrCat(inventory.gpus.size())},
                              {"driver", inventory.driver_version},
                              {"mode", config.mode},
                              {"nvml", lib->path()}});
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
  std::shared_ptr<const Generation> next = *std::move(gen);
  std::unique_ptr<ModeCondition> condition;
  if (*node_config) condition = ModeCondition::Create(next->config());
  std::string from;
  // The generation the running mode took over from, while it starts: once
  // (a mode that cannot start and the one before that cannot either exit).
  std::shared_ptr<const Generation> back;
  for (;;) {
    const AgentMode mode = next->config().agent_mode();
    const ModeContext ctx{request, lib, node_config->get(), events->get(), from, condition.get()};
    std::shared_ptr<const Generation> fallback = std::move(back);
    ModeEnd end = mode == AgentMode::kStatic ? RunStaticMode(ctx, std::move(next))
                  : mode == AgentMode::kDra  ? RunDraMode(ctx, std::move(next))
                                             : RunPluginMode(ctx, std::move(next));
    if (!end.next && end.start_failed && fallback) {
      // The mode handed the node to cannot start (a folder it needs, the
      // kubelet, ...): the one it came from serves the node again, as
      // though the switch had been refused.
      LogError(StrCat("cannot start ", ModeName(mode), " mode; going back to ", from, " mode"));
      next = std::move(fallback);
      from = ModeName(mode);
      continue;
    }
    if (!end.next) {
      if (condition) condition->Stop();
      return end.code;
    }
    from = ModeName(mode);
    back = std::move(end.last);
    next = std::move(end.next);
  }
}

}  // namespace gpu_agent
