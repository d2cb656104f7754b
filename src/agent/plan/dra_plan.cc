#include "agent/plan/dra_plan.h"

#include <unistd.h>

#include <climits>

namespace gpu_agent {

std::vector<dra::DraDevice> DraDevicesOf(const DeviceModel& model,
                                         const nvml::Inventory& inventory) {
  std::vector<dra::DraDevice> out;
  out.reserve(model.units.size());
  for (const DeviceUnit& u : model.units) {
    // Prepare names each device by its CDI entry: a unit without one (a GPU
    // lost at discovery whose minor NVML did not give) could not prepare.
    if (!u.has_cdi_entry()) continue;
    // Time-sliced: shared by as many claims as it has replicas.
    const TimeSlicedResource* sliced = u.replicas > 1 ? model.TimeSlicingOf(u.resource) : nullptr;
    out.push_back(dra::BuildDevice(inventory, u.gpu(inventory), u.mig(inventory), u.name, u.profile,
                                   u.pcie_root, u.replicas,
                                   sliced && sliced->one_per_request ? 1 : u.replicas));
  }
  return out;
}

std::string DraPoolName(const Config& config) {
  if (!config.node_name.empty()) return config.node_name;
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

}  // namespace gpu_agent
