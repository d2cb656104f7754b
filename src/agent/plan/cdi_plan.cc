#include "agent/plan/cdi_plan.h"

#include <optional>

#include "deviceplugin/allocator.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

bool CdiStrategyOn(const Config& config) {
  std::optional<deviceplugin::DeviceListStrategies> list =
      deviceplugin::DeviceListStrategies::Parse(config.flags.plugin.device_list_strategy);
  return list && list->Cdi();
}

absl::StatusOr<cdi::GeneratorInput> CdiInputFrom(const Config& config,
                                                 const nvml::Inventory& inventory,
                                                 const DeviceModel& model) {
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
  for (const DeviceUnit& u : model.units) {
    if (!u.has_cdi_entry()) continue;
    cdi::DeviceEntry entry{{u.uuid, u.index}, {u.parent_node}, u.Describe()};
    if (u.is_mig()) {
      if (!u.capability_error.ok()) return u.capability_error;
      entry.device_nodes.insert(entry.device_nodes.end(), u.capability_nodes.begin(),
                                u.capability_nodes.end());
    }
    in.devices.push_back(std::move(entry));
  }
  return in;
}

absl::StatusOr<cdi::Generated> GenerateCdiSpec(const Config& config,
                                               const nvml::Inventory& inventory,
                                               const DeviceModel& model) {
  absl::StatusOr<cdi::GeneratorInput> input = CdiInputFrom(config, inventory, model);
  if (!input.ok()) return input.status();
  return cdi::Generate(*input);
}

}  // namespace gpu_agent
