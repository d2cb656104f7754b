#include "agent/run/dra_devices.h"

#include <unistd.h>

#include <climits>

namespace gpu_agent {

std::vector<dra::DraDevice> DraDevicesOf(const Generation& gen) {
  dra::DeviceModelInput in;
  in.inventory = &gen.inventory;
  in.chosen = gen.choice.chosen;
  in.mig_devices = gen.config().flags.mig() != MigStrategy::kNone;
  for (size_t pos : in.chosen) {
    const std::string& bus = gen.inventory.gpus[pos].pci_bus_id;
    if (!bus.empty()) in.pcie_roots[bus] = dra::ReadPcieRoot(gen.config().sysfs_root, bus);
  }
  return dra::BuildDevices(in);
}

std::string DraPoolName(const Config& config) {
  if (!config.node_name.empty()) return config.node_name;
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

}  // namespace gpu_agent
