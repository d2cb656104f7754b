#include "agent/plugin_plan.h"

#include <sys/stat.h>

#include "agent/mode_common.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {
int LinkScore(const nvml::GpuLink& link) {
  if (link.nvlinks > 0) return 100 * link.nvlinks + 60;
  if (link.pcie_level <= 0) return 0;
  return std::max(1, 60 - link.pcie_level);  // 10 (same switch) -> 50 ... 50 (SYS) -> 10
}

absl::StatusOr<PluginPlan> PlanPlugin(const Config& config, const nvml::Inventory& inventory) {
  if (config.flags.mig_strategy != "none") {
    return absl::InvalidArgumentError(
        StrCat("flags.migStrategy \"", config.flags.mig_strategy,
               "\" is not supported by this version of gpu-agent; use \"none\""));
  }
  PluginPlan plan;
  plan.allocate.device_list_strategy = config.flags.plugin.device_list_strategy;
  plan.allocate.pass_device_specs = config.flags.plugin.pass_device_specs;
  plan.allocate.dev_root = config.flags.nvidia_dev_root;
  plan.allocate.cdi_annotation_prefix = config.flags.plugin.cdi_annotation_prefix;
  plan.allocate.fail_requests_greater_than_one =
      config.sharing.time_slicing.fail_requests_greater_than_one;

  int replicas = 1;
  std::string name = config.resource_name;
  if (const TimeSlicingResource* r = SharingOf(config)) {
    if (r->devices.size() != 1 || r->devices[0] != "all") {
      return absl::InvalidArgumentError(
          "sharing.timeSlicing.resources[].devices: only \"all\" is supported by this version");
    }
    replicas = r->replicas;
    if (!r->rename.empty()) {
      name = r->rename;
    } else if (config.sharing.time_slicing.rename_by_default) {
      name = config.resource_name + ".shared";
    }
  }

  deviceplugin::ResourceSpec spec;
  spec.resource_name = name;
  spec.endpoint = config.kubelet.endpoint;
  spec.replicated = replicas > 1;
  std::vector<int> physical_of_gpu(inventory.gpus.size(), -1);
  int physical = 0;
  for (size_t i = 0; i < inventory.gpus.size(); ++i) {
    const nvml::GpuRecord& g = inventory.gpus[i];
    if (g.uuid.empty()) {
      LogWarning("GPU without a UUID is not advertised",
                 {{"index", StrCat(g.index)}, {"error", g.error}});
      continue;
    }
    physical_of_gpu[i] = physical;
    plan.gpu_uuids.push_back(g.uuid);
    if (!g.error.empty()) plan.initially_unhealthy.insert(g.uuid);
    const std::string gpu_id =
        config.flags.plugin.device_id_strategy == "index" ? StrCat(g.index) : g.uuid;
    std::vector<std::string> nodes;
    if (g.minor >= 0) {
      const std::string node = StrCat("/dev/nvidia", g.minor);
      if (PathExists(JoinRoot(config.flags.nvidia_dev_root, node))) nodes.push_back(node);
    }
    for (int n = 0; n < replicas; ++n) {
      deviceplugin::PluginDevice d;
      d.id = replicas > 1 ? StrCat(gpu_id, "::", n) : gpu_id;
      d.gpu_id = gpu_id;
      d.gpu_uuid = g.uuid;
      d.physical = physical;
      d.numa_node = g.numa_node;
      d.device_nodes = nodes;
      d.healthy = g.error.empty();
      spec.devices.push_back(std::move(d));
    }
    ++physical;
  }
  spec.link_score.assign(static_cast<size_t>(physical), std::vector<int>(physical, 0));
  for (size_t i = 0; i < inventory.gpus.size(); ++i) {
    for (size_t j = 0; j < inventory.gpus.size(); ++j) {
      const int pi = physical_of_gpu[i], pj = physical_of_gpu[j];
      if (pi < 0 || pj < 0 || i == j || i >= inventory.links.size()) continue;
      spec.link_score[static_cast<size_t>(pi)][static_cast<size_t>(pj)] =
          LinkScore(inventory.links[i][j]);
    }
  }
  plan.resources.push_back(std::move(spec));
  return plan;
}

}  // namespace gpu_agent
