#include "agent/plan/cdi_plan.h"

#include <optional>

#include "base/strings.h"
#include "deviceplugin/allocator.h"
#include "nvml/mig_minors.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

bool CdiStrategyOn(const Config& config) {
  std::optional<deviceplugin::DeviceListStrategies> list =
      deviceplugin::DeviceListStrategies::Parse(config.flags.plugin.device_list_strategy);
  return list && list->Cdi();
}

absl::StatusOr<cdi::GeneratorInput> CdiInputFrom(const Config& config,
                                                 const nvml::Inventory& inventory,
                                                 const GpuChoice& choice,
                                                 std::vector<std::string>* notes) {
  cdi::GeneratorInput in;
  in.kind = config.cdi.Kind();
  in.driver_version = inventory.driver_version;
  in.library_folders = nvml::DriverLibraryFolders(config.flags.DriverRootHere());
  in.driver_root = config.flags.nvidia_driver_root;
  in.dev_root = config.flags.nvidia_dev_root;
  in.driver_root_here = config.flags.DriverRootHere();
  in.dev_root_here = config.flags.DevRootHere();
  in.container_driver_root = config.flags.plugin.container_driver_root;
  in.hook_tool = config.flags.plugin.nvidia_ctk_path;
  in.disabled_hooks = config.flags.plugin.cdi_disable_hooks;
  in.gpus_listed = inventory.gpus.size();
  std::optional<nvml::MigMinors> minors;
  for (size_t pos : choice.chosen) {
    const nvml::GpuRecord& g = inventory.gpus[pos];
    if (g.uuid.empty()) continue;  // not advertised either
    const std::string what = StrCat("GPU ", g.index, " (", g.uuid, ")");
    if (g.minor < 0) {
      notes->push_back(StrCat(what, " has no device minor",
                              g.error.empty() ? "" : StrCat(" (", g.error, ")"),
                              ": left out of the CDI spec"));
      continue;
    }
    const std::string node = StrCat("/dev/nvidia", g.minor);
    if (config.flags.mig() == MigStrategy::kNone || !g.mig_enabled) {
      in.devices.push_back({{g.uuid, StrCat(g.index)}, {node}, what});
      continue;
    }
    for (const nvml::MigRecord& m : g.mig_devices) {
      if (m.uuid.empty()) continue;
      const std::string mig = StrCat("MIG device ", g.index, ":", m.index, " (", m.uuid, ")");
      if (!minors) {
        absl::StatusOr<nvml::MigMinors> read = nvml::MigMinors::Read(config.proc_root);
        if (!read.ok()) {
          return absl::Status(read.status().code(),
                              StrCat(mig, " needs its capability device nodes, listed in ",
                                     "mig-minors: ", read.status().message()));
        }
        minors = *std::move(read);
      }
      absl::StatusOr<std::vector<std::string>> caps = minors->DeviceNodes(
          g.minor, static_cast<int>(m.gpu_instance_id), static_cast<int>(m.compute_instance_id));
      if (!caps.ok()) {
        return absl::Status(caps.status().code(), StrCat(mig, ": ", caps.status().message()));
      }
      cdi::DeviceEntry entry{{m.uuid, StrCat(g.index, ":", m.index)}, {node}, mig};
      entry.device_nodes.insert(entry.device_nodes.end(), caps->begin(), caps->end());
      in.devices.push_back(std::move(entry));
    }
  }
  return in;
}

absl::StatusOr<cdi::Generated> GenerateCdiSpec(const Config& config,
                                               const nvml::Inventory& inventory,
                                               const GpuChoice& choice) {
  std::vector<std::string> notes;
  absl::StatusOr<cdi::GeneratorInput> input = CdiInputFrom(config, inventory, choice, &notes);
  if (!input.ok()) return input.status();
  absl::StatusOr<cdi::Generated> generated = cdi::Generate(*input);
  if (!generated.ok()) return generated.status();
  notes.insert(notes.end(), generated->notes.begin(), generated->notes.end());
  generated->notes = std::move(notes);
  return generated;
}

}  // namespace gpu_agent
