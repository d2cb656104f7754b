#include "agent/plan/resource_plan.h"

#include <map>
#include <optional>

#include "agent/config/device_selection.h"
#include "agent/plan/endpoint_names.h"
#include "agent/plan/link_score.h"
#include "base/file_util.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "nvml/mig_minors.h"
#include "nvml/mig_profile.h"

namespace gpu_agent {
namespace {

using deviceplugin::PluginDevice;
using deviceplugin::ResourceSpec;

// One thing a container can be given: a whole GPU or one MIG device.
struct Unit {
  const nvml::GpuRecord* gpu = nullptr;
  const nvml::MigRecord* mig = nullptr;  // null: the whole GPU
  size_t gpu_pos = 0;                    // position in the inventory (links)
  std::string id;                        // runtime ID per deviceIDStrategy
  std::vector<std::string> device_nodes;

  std::string Describe() const {
    if (!mig) return StrCat("GPU ", gpu->index, " (", gpu->uuid, ")");
    return StrCat("MIG device ", gpu->index, ":", mig->index, " (", mig->uuid, ")");
  }
  // Whether a timeSlicing devices entry names this unit.
  bool NamedBy(const std::string& entry) const {
    const std::string e = AsciiToLower(entry);
    if (mig) return e == AsciiToLower(mig->uuid) || e == StrCat(gpu->index, ":", mig->index);
    return e == AsciiToLower(gpu->uuid) || e == StrCat(gpu->index);
  }
};

// Units advertised under one resource name, each as `replicas` devices
// (time-slicing). Grouping by resource comes first (replicas 1); sharing may
// then split a group into its whole units and its replicated ones.
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

  absl::StatusOr<ResourcePlan> Run(const GpuChoice& choice) {
    std::vector<size_t> gpus;
    for (size_t pos : choice.chosen) {
      const nvml::GpuRecord& g = inv_.gpus[pos];
      if (g.uuid.empty()) {
        Warn(StrCat("GPU ", g.index, " has no UUID and is not advertised",
                    g.error.empty() ? "" : StrCat(": ", g.error)));
        continue;
      }
      gpus.push_back(pos);
      plan_.gpu_uuids.push_back(g.uuid);
      // Only a lost GPU starts out unhealthy; any other failed query (no
      // privilege for one value, say) leaves a GPU that works.
      if (g.lost) plan_.initially_unhealthy.insert(g.uuid);
    }
    if (absl::Status s = GroupUnits(gpus); !s.ok()) return s;
    // No device at all: still serve the main resource, empty, so the
    // kubelet hears "0" rather than nothing.
    if (groups_.empty()) GroupFor(c_.resource_name);
    for (Group& group : groups_) {
      if (absl::Status s = Share(group); !s.ok()) return s;
    }
    for (const TimeSlicingResource& r : c_.sharing.time_slicing.resources) {
      bool found = false;
      for (const Group& g : groups_) found |= g.resource == r.name;
      if (!found) {
        Warn(StrCat("sharing.timeSlicing: no device on this node is advertised as ", r.name,
                    "; its sharing entry does nothing here"));
      }
    }
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
  void Warn(std::string w) { plan_.warnings.push_back(std::move(w)); }

  Group& GroupFor(const std::string& resource) {
    for (Group& g : groups_) {
      if (g.resource == resource) return g;
    }
    groups_.push_back({resource, {}});
    return groups_.back();
  }

  Unit WholeGpu(size_t pos) {
    const nvml::GpuRecord& g = inv_.gpus[pos];
    return Unit{&g, nullptr, pos, ById() ? g.uuid : StrCat(g.index), ParentNode(g)};
  }

  bool ById() const { return c_.flags.plugin.id_strategy() == DeviceIdStrategy::kUuid; }

  std::vector<std::string> ParentNode(const nvml::GpuRecord& g) const {
    if (g.minor < 0) return {};
    const std::string node = StrCat("/dev/nvidia", g.minor);
    if (!PathExists(JoinRoot(c_.flags.DevRootHere(), node))) return {};
    return {node};
  }

  absl::StatusOr<Unit> MigUnit(size_t pos, const nvml::MigRecord& m) {
    const nvml::GpuRecord& g = inv_.gpus[pos];
    Unit u{&g, &m, pos, ById() ? m.uuid : StrCat(g.index, ":", m.index), ParentNode(g)};
    if (pass_device_specs_) {
      if (!minors_) {
        absl::StatusOr<nvml::MigMinors> read = nvml::MigMinors::Read(c_.proc_root);
        if (!read.ok()) {
          return absl::Status(read.status().code(),
                              StrCat("cannot pass device specs for MIG devices (",
                                     "flags.plugin.passDeviceSpecs): ", read.status().message()));
        }
        minors_ = *std::move(read);
      }
      absl::StatusOr<std::vector<std::string>> caps = minors_->DeviceNodes(
          g.minor, static_cast<int>(m.gpu_instance_id), static_cast<int>(m.compute_instance_id));
      if (!caps.ok()) {
        return absl::InvalidArgumentError(
            StrCat("cannot pass device specs for ", u.Describe(), ": ", caps.status().message()));
      }
      u.device_nodes.insert(u.device_nodes.end(), caps->begin(), caps->end());
    }
    return u;
  }

  absl::Status GroupUnits(const std::vector<size_t>& gpus) {
    MigStrategy strategy = c_.flags.mig();
    if (strategy == MigStrategy::kSingle) {
      std::vector<std::string> whole;
      for (size_t pos : gpus) {
        const nvml::GpuRecord& g = inv_.gpus[pos];
        if (!g.mig_enabled && g.mig_mode_error.empty()) whole.push_back(StrCat(g.index));
      }
      // As NVIDIA's plugin does: single on a node with no GPU in MIG mode
      // advertises the GPUs whole, so one DaemonSet serves MIG and other
      // nodes alike. Only a mix of MIG and whole GPUs is refused.
      if (whole.size() == gpus.size()) {
        strategy = MigStrategy::kNone;
      } else if (!whole.empty()) {
        return absl::InvalidArgumentError(
            StrCat("flags.migStrategy single needs every GPU in MIG mode, but GPU(s) ",
                   StrJoin(whole, ", "),
                   " are not; enable MIG on them, leave them out with devices.exclude, or use "
                   "migStrategy mixed"));
      }
    }
    std::map<std::string, std::vector<std::string>> by_profile;  // single: profile -> devices
    for (size_t pos : gpus) {
      const nvml::GpuRecord& g = inv_.gpus[pos];
      if (strategy != MigStrategy::kNone && !g.mig_mode_error.empty()) {
        // Whole, it may be a GPU in MIG mode, where a pod's CUDA finds no device.
        Warn(StrCat("GPU ", g.index, " (", g.uuid, ") is not advertised: its MIG mode is unknown (",
                    g.mig_mode_error, ") and flags.migStrategy ", c_.flags.mig_strategy,
                    " must not hand out a MIG GPU whole"));
        continue;
      }
      if (strategy == MigStrategy::kNone || !g.mig_enabled) {
        if (g.mig_enabled) {
          Warn(StrCat("GPU ", g.index, " (", g.uuid,
                      ") is in MIG mode but flags.migStrategy is none: advertised whole"));
        }
        GroupFor(c_.resource_name).units.push_back(WholeGpu(pos));
        continue;
      }
      if (g.mig_devices.empty()) {
        if (strategy == MigStrategy::kSingle) {
          return absl::InvalidArgumentError(
              StrCat("flags.migStrategy single: GPU ", g.index, " (", g.uuid,
                     ") is in MIG mode with no MIG devices; create them or leave the GPU out"));
        }
        Warn(StrCat("GPU ", g.index, " (", g.uuid,
                    ") is in MIG mode with no MIG devices: nothing of it is advertised"));
        continue;
      }
      for (const nvml::MigRecord& m : g.mig_devices) {
        const std::string profile = nvml::MigProfileName(g, m);
        if (profile.empty() || m.uuid.empty()) {
          Warn(StrCat("MIG device ", g.index, ":", m.index, " (",
                      m.uuid.empty() ? "no UUID" : m.uuid, ") has no profile name (NVML gave ",
                      m.gpu_instance_slices, " GPU slices, ", m.memory_mib,
                      " MiB): not advertised"));
          continue;
        }
        absl::StatusOr<Unit> unit = MigUnit(pos, m);
        if (!unit.ok()) return unit.status();
        if (strategy == MigStrategy::kSingle) {
          by_profile[profile].push_back(unit->Describe());
          GroupFor(c_.resource_name).units.push_back(*std::move(unit));
        } else {
          GroupFor(StrCat(kMigResourcePrefix, profile)).units.push_back(*std::move(unit));
        }
      }
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

  const TimeSlicingResource* SharingFor(const std::string& resource) const {
    for (const TimeSlicingResource& r : c_.sharing.time_slicing.resources) {
      if (r.name == resource) return &r;
    }
    return nullptr;
  }

  // Why a devices entry matches no unit of `group`, in the operator's terms.
  std::string WhyUnmatched(const Group& group, const std::string& entry, const std::string& where) {
    for (const Group& other : groups_) {
      if (&other == &group) continue;
      for (const Unit& u : other.units) {
        if (u.NamedBy(entry)) {
          return StrCat(where, ": \"", entry, "\" is ", u.Describe(), ", advertised as ",
                        other.resource, ", not ", group.resource, "; share it under ",
                        other.resource);
        }
      }
    }
    for (const Unit& u : group.units) {
      if (u.mig &&
          (AsciiToLower(entry) == AsciiToLower(u.gpu->uuid) || entry == StrCat(u.gpu->index))) {
        return StrCat(where, ": \"", entry, "\" is GPU ", u.gpu->index,
                      ", which is in MIG mode: replicas go on its MIG devices; name them by "
                      "MIG UUID or <gpu>:<mig>");
      }
    }
    for (const nvml::GpuRecord& g : inv_.gpus) {
      if (!g.mig_enabled) continue;
      for (const nvml::MigRecord& m : g.mig_devices) {
        if (AsciiToLower(entry) == AsciiToLower(m.uuid) || entry == StrCat(g.index, ":", m.index)) {
          return StrCat(where, ": \"", entry, "\" is a MIG device, and ", group.resource,
                        " has no MIG devices under flags.migStrategy ", c_.flags.mig_strategy,
                        "; replicas are not allowed on it here");
        }
      }
    }
    return StrCat(where, ": \"", entry, "\" matches no ", group.resource,
                  " device on this node (give GPU indexes or UUIDs; MIG UUIDs or <gpu>:<mig> for "
                  "MIG resources)");
  }

  absl::Status Share(Group& group) {
    const TimeSlicingResource* r = SharingFor(group.resource);
    if (!r) {
      served_.push_back(group);
      return absl::OkStatus();
    }
    size_t index = 0;
    for (; index < c_.sharing.time_slicing.resources.size(); ++index) {
      if (&c_.sharing.time_slicing.resources[index] == r) break;
    }
    const std::string where = StrCat("sharing.timeSlicing.resources[", index, "].devices");
    std::vector<bool> shared(group.units.size(), false);
    if (r->device_count > 0) {
      if (static_cast<size_t>(r->device_count) > group.units.size()) {
        Warn(StrCat(where, ": ", r->device_count, " asked, ", group.resource, " has ",
                    group.units.size(), " on this node; sharing all of them"));
      }
      for (size_t i = 0; i < group.units.size() && i < static_cast<size_t>(r->device_count); ++i) {
        shared[i] = true;
      }
    } else if (r->devices.size() == 1 && r->devices[0] == "all") {
      shared.assign(group.units.size(), true);
    } else {
      for (const std::string& entry : r->devices) {
        bool matched = false;
        for (size_t i = 0; i < group.units.size(); ++i) {
          if (group.units[i].NamedBy(entry)) shared[i] = matched = true;
        }
        if (!matched) return absl::InvalidArgumentError(WhyUnmatched(group, entry, where));
      }
    }
    std::string name = group.resource;
    if (!r->rename.empty()) {
      name = r->rename;
    } else if (c_.sharing.time_slicing.rename_by_default) {
      name = group.resource + ".shared";
    }
    std::vector<Unit> whole, sliced;
    for (size_t i = 0; i < group.units.size(); ++i) {
      (shared[i] ? sliced : whole).push_back(group.units[i]);
    }
    if (!whole.empty() && name == group.resource) {
      return absl::InvalidArgumentError(
          StrCat(where, " shares ", sliced.size(), " of ", group.units.size(), " ", group.resource,
                 " devices: the replicas need a name of their own so the rest stay whole; set "
                 "rename, or sharing.timeSlicing.renameByDefault: true"));
    }
    const size_t devices = sliced.size() * static_cast<size_t>(r->replicas);
    if (devices > kMaxDevicesPerResource) {
      return absl::InvalidArgumentError(
          StrCat("sharing.timeSlicing.resources[", index, "]: ", sliced.size(), " devices x ",
                 r->replicas, " replicas would list ", devices, " ", name,
                 " devices to the kubelet, more than the ", kMaxDevicesPerResource,
                 " one resource may have (its ListAndWatch answer would pass what the kubelet "
                 "takes); give fewer replicas"));
    }
    if (!whole.empty()) served_.push_back({group.resource, std::move(whole), 1});
    served_.push_back({name, std::move(sliced), r->replicas});
    return absl::OkStatus();
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
        d.id = s.replicas > 1 ? StrCat(u.id, "::", n) : u.id;
        d.gpu_id = u.id;
        d.key = DeviceKey::Gpu(u.gpu->uuid);
        if (u.mig) {
          d.key.gpu_instance = static_cast<int>(u.mig->gpu_instance_id);
          d.key.compute_instance = static_cast<int>(u.mig->compute_instance_id);
        }
        d.physical = static_cast<int>(p);
        d.numa_node = u.gpu->numa_node;
        d.device_nodes = u.device_nodes;
        d.healthy = !u.gpu->lost;
        spec->devices.push_back(std::move(d));
      }
    }
    std::vector<size_t> positions;
    for (const Unit& u : s.units) positions.push_back(u.gpu_pos);
    spec->link_score = LinkScoreMatrix(inv_, positions);
  }

  const Config& c_;
  const nvml::Inventory& inv_;
  const bool pass_device_specs_;
  ResourcePlan plan_;
  std::vector<Group> groups_;  // by resource, before sharing
  std::vector<Group> served_;  // one per socket, after sharing
  std::optional<nvml::MigMinors> minors_;
};

}  // namespace

absl::StatusOr<ResourcePlan> PlanResources(const Config& config, const nvml::Inventory& inventory,
                                           const GpuChoice& choice) {
  return Planner(config, inventory, /*serving=*/true).Run(choice);
}

absl::StatusOr<ResourcePlan> PlanAdvertised(const Config& config, const nvml::Inventory& inventory,
                                            const GpuChoice& choice) {
  return Planner(config, inventory, /*serving=*/false).Run(choice);
}

}  // namespace gpu_agent
