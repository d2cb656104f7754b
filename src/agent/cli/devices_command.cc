// `gpu-agent devices`: NVML started, the GPUs discovered and printed.
#include "agent/cli/devices_command.h"

#include <cstdio>

#include "agent/cli/device_report.h"
#include "agent/plan/nvml_start.h"
#include "base/exit_code.h"
#include "nvml/inventory.h"

namespace gpu_agent {

int DevicesCommand(const LoadedConfig& loaded, const std::string& output) {
  absl::StatusOr<Discovered> found = DiscoverGpus(loaded.config);
  if (!found.ok()) {
    std::fprintf(stderr, "gpu-agent: %s\n", std::string(found.status().message()).c_str());
    return kExitFailure;
  }
  const nvml::Inventory& inv = found->inventory;
  std::string text = output == "json"   ? DevicesAsJson(inv)
                     : output == "yaml" ? DevicesAsYaml(inv)
                                        : DevicesAsTable(inv);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace gpu_agent
