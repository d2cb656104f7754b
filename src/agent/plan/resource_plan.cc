#include "agent/plan/resource_plan.h"

#include <map>

#include "agent/plan/endpoint_names.h"
#include "agent/plan/link_score.h"
#include "base/file_util.h"
#include "base/resource_name.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

using deviceplugin::PluginDevice;
using deviceplugin::ResourceSpec;

// A unit of the device model as one resource serves it: its runtime ID
// (per deviceIDStrategy) and the device nodes passed with it.
struct Unit {
  const DeviceUnit* unit = nullptr;
  const nvml::GpuRecord* gpu = nullptr;
  std::string id;
  std::vector<std::string> device_nodes;
};

// Units advertised under one resource name, each as `replicas` devices
// (time-slicing). Grouping by resource comes first (replicas 1); the
// model's time-slicing then splits a group into its whole units and its
// replicated ones.
struct Group {
  std::string resource;
  std::vector<Unit> units;
  int replicas = 1;
};

class Planner {
 public:
  // `serving`: plan what plugin mode serves, device nodes of MIG devices
  // included when passDeviceSpecs asks; otherwise only what is advertised.
  Planner(const Config& c, const nvml::Inventory& inv, bool serving)
      : c_(c), inv_(inv), pass_device_specs_(serving && c.flags.plugin.pass_device_specs) {}

  absl::StatusOr<ResourcePlan> Run(const DeviceModel& model) {
    if (absl::Status s = GroupUnits(model); !s.ok()) return s;
    if (!model.sharing_error.ok()) return model.sharing_error;
    plan_.warnings = model.sharing_warnings;
    // No device at all: still serve the main resource, empty, so the
    // kubelet hears "0" rather than nothing.
    if (groups_.empty()) GroupFor(groups_, c_.resource_name);
    for (Group& group : groups_) Split(group, model);
    AssignEndpoints();
    plan_.allocate.device_list =
        deviceplugin::DeviceListStrategies::Parse(c_.flags.plugin.device_list_strategy)
            .value_or(deviceplugin::DeviceListStrategies{});
    plan_.allocate.pass_device_specs = pass_device_specs_;
    plan_.allocate.dev_root = c_.flags.nvidia_dev_root;
    plan_.allocate.dev_root_here = c_.flags.DevRootHere();
    plan_.allocate.cdi_annotation_prefix = c_.flags.plugin.cdi_annotation_prefix;
    plan_.allocate.cdi_kind = c_.cdi.Kind();
    plan_.allocate.fail_requests_greater_than_one =
        c_.sharing.time_slicing.fail_requests_greater_than_one;
    return std::move(plan_);
  }

 private:
  bool ById() const { return c_.flags.plugin.id_strategy() == DeviceIdStrategy::kUuid; }

  // The parent's device node, passed where it exists under the dev root.
  std::vector<std::string> ParentNode(const DeviceUnit& u) const {
    if (u.parent_node.empty() || !PathExists(JoinRoot(c_.flags.DevRootHere(), u.parent_node))) {
      return {};
    }
    return {u.parent_node};
  }

  absl::StatusOr<Unit> Serve(const DeviceUnit& du) const {
    Unit u{&du, &du.gpu(inv_), ById() ? du.uuid : du.index, ParentNode(du)};
    if (du.is_mig() && pass_device_specs_) {
      if (!du.capability_error.ok()) {
        return absl::Status(du.capability_error.code(),
                            StrCat("cannot pass device specs (flags.plugin.passDeviceSpecs): ",
                                   du.capability_error.message()));
      }
      u.device_nodes.insert(u.device_nodes.end(), du.capability_nodes.begin(),
                            du.capability_nodes.end());
    }
    return u;
  }

  absl::Status GroupUnits(const DeviceModel& model) {
    if (c_.flags.mig() == MigStrategy::kSingle) {
      std::vector<std::string> whole;
      bool mig = !model.empty_mig_gpus.empty();
      for (const DeviceUnit& u : model.units) {
        if (u.is_mig()) {
          mig = true;
        } else {
          whole.push_back(u.index);
        }
      }
      // As NVIDIA's plugin does: single on a node with no GPU in MIG mode
      // advertises the GPUs whole, so one DaemonSet serves MIG and other
      // nodes alike. Only a mix of MIG and whole GPUs is refused.
      if (mig && !whole.empty()) {
        return absl::InvalidArgumentError(
            StrCat("flags.migStrategy single needs every GPU in MIG mode, but GPU(s) ",
                   StrJoin(whole, ", "),
                   " are not; enable MIG on them, leave them out with devices.exclude, or use "
                   "migStrategy mixed"));
      }
      if (!model.empty_mig_gpus.empty()) {
        const nvml::GpuRecord& g = inv_.gpus[model.empty_mig_gpus.front()];
        return absl::InvalidArgumentError(
            StrCat("flags.migStrategy single: GPU ", g.index, " (", g.uuid,
                   ") is in MIG mode with no MIG devices; create them or leave the GPU out"));
      }
    }
    std::map<std::string, std::vector<std::string>> by_profile;  // single: profile -> devices
    for (const DeviceUnit& du : model.units) {
      absl::StatusOr<Unit> unit = Serve(du);
      if (!unit.ok()) return unit.status();
      if (du.is_mig() && c_.flags.mig() == MigStrategy::kSingle) {
        by_profile[du.profile].push_back(du.Describe());
      }
      GroupFor(groups_, du.resource).units.push_back(*std::move(unit));
    }
    if (by_profile.size() > 1) {
      std::string found;
      for (const auto& [profile, devices] : by_profile) {
        StrAppend(&found, found.empty() ? "" : "; ", profile, ": ", StrJoin(devices, ", "));
      }
      return absl::InvalidArgumentError(
          StrCat("flags.migStrategy single needs one MIG profile on every GPU, found ",
                 by_profile.size(), " (", found, "); use migStrategy mixed"));
    }
    for (Group& g : groups_) {
      if (g.resource != c_.resource_name) {
        if (absl::Status s = ValidateExtendedResourceName(g.resource); !s.ok()) {
          return absl::InvalidArgumentError(
              StrCat("MIG resource \"", g.resource, "\": ", s.message()));
        }
      }
    }
    return absl::OkStatus();
  }

  // The group as served: whole, or split by the model's time-slicing into
  // its whole units and its replicated ones.
  void Split(const Group& group, const DeviceModel& model) {
    const TimeSlicedResource* t = model.TimeSlicingOf(group.resource);
    if (!t) {
      served_.push_back(group);
      return;
    }
    std::vector<Unit> whole, sliced;
    for (const Unit& u : group.units) (u.unit->replicas > 1 ? sliced : whole).push_back(u);
    if (!whole.empty()) served_.push_back({group.resource, std::move(whole), 1});
    served_.push_back({t->shared_resource, std::move(sliced), t->replicas});
  }

  void AssignEndpoints() {
    std::vector<std::string> names;
    for (const Group& g : served_) names.push_back(g.resource);
    const std::vector<std::string> endpoints =
        gpu_agent::AssignEndpoints(names, c_.resource_name, c_.kubelet.endpoint);
    for (size_t i = 0; i < served_.size(); ++i) {
      ResourceSpec spec;
      spec.resource_name = served_[i].resource;
      spec.endpoint = endpoints[i];
      Fill(served_[i], &spec);
      plan_.resources.push_back(std::move(spec));
    }
  }

  void Fill(const Group& s, ResourceSpec* spec) const {
    spec->replicated = s.replicas > 1;
    spec->pack_replicas = c_.sharing.time_slicing.allocation_policy == "packed";
    for (size_t p = 0; p < s.units.size(); ++p) {
      const Unit& u = s.units[p];
      for (int n = 0; n < s.replicas; ++n) {
        PluginDevice d;
        d.id = u.unit->ReplicaId(u.id, n);
        d.gpu_id = u.id;
        d.key = u.unit->key;
        d.physical = static_cast<int>(p);
        d.numa_node = u.gpu->numa_node;
        d.device_nodes = u.device_nodes;
        d.healthy = !u.unit->lost;
        spec->devices.push_back(std::move(d));
      }
    }
    std::vector<size_t> positions;
    for (const Unit& u : s.units) positions.push_back(u.unit->gpu_pos);
    spec->link_score = LinkScoreMatrix(inv_, positions);
  }

  const Config& c_;
  const nvml::Inventory& inv_;
  const bool pass_device_specs_;
  ResourcePlan plan_;
  std::vector<Group> groups_;  // by resource, before sharing
  std::vector<Group> served_;  // one per socket, after sharing
};

}  // namespace

absl::StatusOr<ResourcePlan> PlanResources(const Config& config, const nvml::Inventory& inventory,
                                           const DeviceModel& model) {
  return Planner(config, inventory, /*serving=*/true).Run(model);
}

absl::StatusOr<ResourcePlan> PlanAdvertised(const Config& config, const nvml::Inventory& inventory,
                                            const DeviceModel& model) {
  return Planner(config, inventory, /*serving=*/false).Run(model);
}

}  // namespace gpu_agent
