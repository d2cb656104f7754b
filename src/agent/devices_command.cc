// `gpu-agent devices`: NVML started, the GPUs discovered and printed.
#include "agent/devices_command.h"

#include <cstdio>

#include "agent/device_report.h"
#include "agent/exit_code.h"
#include "agent/nvml_start.h"
#include "nvml/inventory.h"

namespace gpu_agent {

int DevicesCommand(const LoadedConfig& loaded, const std::string& output) {
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib = StartNvml(loaded.config);
  if (!lib.ok()) {
    std::fprintf(stderr, "gpu-agent: %s\n", std::string(lib.status().message()).c_str());
    return kExitFailure;
  }
  absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(**lib, loaded.config.sysfs_root);
  if (!inv.ok()) {
    std::fprintf(stderr, "gpu-agent: %s\n", std::string(inv.status().message()).c_str());
    return kExitFailure;
  }
  std::string text = output == "json"   ? DevicesAsJson(*inv)
                     : output == "yaml" ? DevicesAsYaml(*inv)
                                        : DevicesAsTable(*inv);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace gpu_agent
