#include "agent/commands.h"
#include "base/log.h"
#include "base/strings.h"
#include "nvml/inventory.h"

namespace gpu_agent {

int RunCommand(const ConfigRequest& request, LoadedConfig loaded) {
  (void)request;
  const Config& config = loaded.config;
  for (const std::string& note : loaded.notes) LogInfo(note);
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib = StartNvml(config);
  nvml::Inventory inventory;
  if (!lib.ok()) {
    if (config.flags.fail_on_init_error) {
      LogError("cannot start NVML; exiting because failOnInitError is true",
               {{"error", std::string(lib.status().message())}});
      return kExitFailure;
    }
    LogWarning("cannot start NVML; running with 0 devices because failOnInitError is false",
               {{"error", std::string(lib.status().message())}});
  } else {
    absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(**lib, config.sysfs_root);
    if (!inv.ok()) {
      LogError("GPU discovery failed", {{"error", std::string(inv.status().message())}});
      if (config.flags.fail_on_init_error) return kExitFailure;
    } else {
      inventory = *std::move(inv);
    }
  }
  LogInfo("GPUs discovered",
          {{"count", StrCat(inventory.gpus.size())}, {"driver", inventory.driver_version}});
  LogError("this build does not include the selected mode yet", {{"mode", config.mode}});
  return kExitFailure;
}

}  // namespace gpu_agent
