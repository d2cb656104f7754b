// `gpu-agent devices`: NVML started, the GPUs discovered and printed.
#include "agent/cli/devices_command.h"

#include <cstdio>

#include "agent/cli/device_report.h"
#include "agent/config/device_selection.h"
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
  nvml::Inventory& inv = found->inventory;
  // The selection (devices.include / exclude / max) narrows the list as it
  // narrows what run exposes; stderr says so, so the list is never taken
  // for all of the node's GPUs.
  const Config::DeviceSelection& sel = loaded.config.devices;
  if (!sel.include.empty() || !sel.exclude.empty() || sel.max > 0) {
    absl::StatusOr<GpuChoice> choice = ChooseGpus(sel, inv.gpus);
    if (!choice.ok()) {
      std::fprintf(stderr, "gpu-agent: %s\n", std::string(choice.status().message()).c_str());
      return kExitUsage;
    }
    for (const std::string& w : choice->warnings) {
      std::fprintf(stderr, "gpu-agent: warning: %s\n", w.c_str());
    }
    std::fprintf(stderr, "gpu-agent: showing the %zu of %zu GPUs devices.* selects\n",
                 choice->chosen.size(), inv.gpus.size());
    nvml::Inventory chosen = inv;
    chosen.gpus.clear();
    chosen.links.clear();
    for (size_t i : choice->chosen) {
      chosen.gpus.push_back(inv.gpus[i]);
      std::vector<nvml::GpuLink> row;
      for (size_t j : choice->chosen) {
        row.push_back(i < inv.links.size() && j < inv.links[i].size() ? inv.links[i][j]
                                                                      : nvml::GpuLink{});
      }
      chosen.links.push_back(std::move(row));
    }
    inv = std::move(chosen);
  }
  std::string text = output == "json"   ? DevicesAsJson(inv)
                     : output == "yaml" ? DevicesAsYaml(inv)
                                        : DevicesAsTable(inv);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace gpu_agent
