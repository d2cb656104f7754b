#include "agent/plan/time_slicing.h"

#include <string>
#include <vector>

#include "base/strings.h"

namespace gpu_agent {
namespace {

// Whether a timeSlicing devices entry names the unit.
bool NamedBy(const DeviceUnit& u, const std::string& entry) {
  return AsciiToLower(entry) == AsciiToLower(u.uuid) || entry == u.index;
}

// The units advertised under one resource, before sharing.
struct Group {
  std::string resource;
  std::vector<DeviceUnit*> units;
};

class Sharer {
 public:
  Sharer(const Config& c, const nvml::Inventory& inv, DeviceModel* model)
      : c_(c), inv_(inv), model_(model) {}

  void Run() {
    for (DeviceUnit& u : model_->units) GroupFor(groups_, u.resource).units.push_back(&u);
    // No device at all: the main resource is still advertised, empty.
    if (groups_.empty()) GroupFor(groups_, c_.resource_name);
    for (Group& group : groups_) {
      if (absl::Status s = Share(group); !s.ok()) {
        model_->sharing_error = s;
        return;
      }
    }
    for (const TimeSlicingResource& r : c_.sharing.time_slicing.resources) {
      bool found = false;
      for (const Group& g : groups_) found |= g.resource == r.name;
      if (!found) {
        Warn(StrCat("sharing.timeSlicing: no device on this node is advertised as ", r.name,
                    "; its sharing entry does nothing here"));
      }
    }
  }

 private:
  void Warn(std::string w) { model_->sharing_warnings.push_back(std::move(w)); }

  // The entry for `resource` and its position; null when it has none.
  const TimeSlicingResource* SharingFor(const std::string& resource, size_t* index) const {
    const std::vector<TimeSlicingResource>& all = c_.sharing.time_slicing.resources;
    for (*index = 0; *index < all.size(); ++*index) {
      if (all[*index].name == resource) return &all[*index];
    }
    return nullptr;
  }

  // Why a devices entry matches no unit of `group`, in the operator's terms.
  std::string WhyUnmatched(const Group& group, const std::string& entry, const std::string& where) {
    for (const Group& other : groups_) {
      if (&other == &group) continue;
      for (const DeviceUnit* u : other.units) {
        if (NamedBy(*u, entry)) {
          return StrCat(where, ": \"", entry, "\" is ", u->Describe(), ", advertised as ",
                        other.resource, ", not ", group.resource, "; share it under ",
                        other.resource);
        }
      }
    }
    for (const DeviceUnit* u : group.units) {
      const nvml::GpuRecord& g = u->gpu(inv_);
      if (u->is_mig() &&
          (AsciiToLower(entry) == AsciiToLower(g.uuid) || entry == StrCat(g.index))) {
        return StrCat(where, ": \"", entry, "\" is GPU ", g.index,
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

  // Which units of `group` the entry `r` shares; an error for an entry
  // naming no unit of it.
  absl::StatusOr<std::vector<bool>> Chosen(const Group& group, const TimeSlicingResource& r,
                                           const std::string& where) {
    std::vector<bool> shared(group.units.size(), false);
    if (r.device_count > 0) {
      if (static_cast<size_t>(r.device_count) > group.units.size()) {
        Warn(StrCat(where, ": ", r.device_count, " asked, ", group.resource, " has ",
                    group.units.size(), " on this node; sharing all of them"));
      }
      for (size_t i = 0; i < group.units.size() && i < static_cast<size_t>(r.device_count); ++i) {
        shared[i] = true;
      }
    } else if (r.devices.size() == 1 && r.devices[0] == "all") {
      shared.assign(group.units.size(), true);
    } else {
      for (const std::string& entry : r.devices) {
        bool matched = false;
        for (size_t i = 0; i < group.units.size(); ++i) {
          if (NamedBy(*group.units[i], entry)) shared[i] = matched = true;
        }
        if (!matched) return absl::InvalidArgumentError(WhyUnmatched(group, entry, where));
      }
    }
    return shared;
  }

  absl::Status Share(Group& group) {
    size_t index = 0;
    const TimeSlicingResource* r = SharingFor(group.resource, &index);
    if (!r) return absl::OkStatus();
    const std::string where = StrCat("sharing.timeSlicing.resources[", index, "].devices");
    absl::StatusOr<std::vector<bool>> shared = Chosen(group, *r, where);
    if (!shared.ok()) return shared.status();
    std::string name = group.resource;
    if (!r->rename.empty()) {
      name = r->rename;
    } else if (c_.sharing.time_slicing.rename_by_default) {
      name = group.resource + ".shared";
    }
    size_t sliced = 0;
    for (bool s : *shared) sliced += s;
    if (sliced < group.units.size() && name == group.resource) {
      return absl::InvalidArgumentError(
          StrCat(where, " shares ", sliced, " of ", group.units.size(), " ", group.resource,
                 " devices: the replicas need a name of their own so the rest stay whole; set "
                 "rename, or sharing.timeSlicing.renameByDefault: true"));
    }
    const size_t devices = sliced * static_cast<size_t>(r->replicas);
    if (devices > kMaxDevicesPerResource) {
      return absl::InvalidArgumentError(
          StrCat("sharing.timeSlicing.resources[", index, "]: ", sliced, " devices x ", r->replicas,
                 " replicas would list ", devices, " ", name,
                 " devices to the kubelet, more than the ", kMaxDevicesPerResource,
                 " one resource may have (its ListAndWatch answer would pass what the kubelet "
                 "takes); give fewer replicas"));
    }
    for (size_t i = 0; i < group.units.size(); ++i) {
      if ((*shared)[i]) group.units[i]->replicas = r->replicas;
    }
    model_->time_sliced.push_back({group.resource, name, r->replicas,
                                   c_.sharing.time_slicing.fail_requests_greater_than_one});
    return absl::OkStatus();
  }

  const Config& c_;
  const nvml::Inventory& inv_;
  DeviceModel* model_;
  std::vector<Group> groups_;  // by resource, in the units' order
};

}  // namespace

void ApplyTimeSlicing(const Config& config, const nvml::Inventory& inventory, DeviceModel* model) {
  Sharer(config, inventory, model).Run();
}

}  // namespace gpu_agent
