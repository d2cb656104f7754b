#include "agent/plan/device_model.h"

#include <optional>

#include "agent/plan/time_slicing.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "dra/dra_device.h"
#include "nvml/mig_minors.h"
#include "nvml/mig_profile.h"

namespace gpu_agent {

std::string DeviceUnit::Describe() const {
  return StrCat(is_mig() ? "MIG device " : "GPU ", index, " (", uuid, ")");
}

std::string DeviceUnit::ReplicaId(const std::string& id, int n) const {
  return replicas > 1 ? StrCat(id, "::", n) : id;
}

const TimeSlicedResource* DeviceModel::TimeSlicingOf(const std::string& resource) const {
  for (const TimeSlicedResource& t : time_sliced) {
    if (t.resource == resource) return &t;
  }
  return nullptr;
}

namespace {

class ModelBuilder {
 public:
  ModelBuilder(const Config& c, const nvml::Inventory& inv) : c_(c), inv_(inv) {}

  DeviceModel Run(const GpuChoice& choice) {
    const MigStrategy strategy = c_.flags.mig();
    for (size_t pos : choice.chosen) {
      const nvml::GpuRecord& g = inv_.gpus[pos];
      const std::string what = StrCat("GPU ", g.index, " (", g.uuid, ")");
      const std::string why = g.error.empty() ? "" : StrCat(": ", g.error);
      if (g.uuid.empty()) {
        Warn(StrCat("GPU ", g.index, " has no UUID and is not advertised", why));
        continue;
      }
      if (g.minor < 0 && !g.lost) {
        // No /dev/nvidia<minor> to give a container, no CDI entry to name.
        Warn(StrCat(what, " has no device minor and is not advertised", why));
        continue;
      }
      if (g.minor < 0) {
        // Lost at discovery: kept, unhealthy, so that it comes back when the
        // GPU is reset, as a GPU lost later does.
        Warn(StrCat(what, " is lost and NVML gives no device minor: advertised unhealthy, with no ",
                    "device node and no CDI entry (so no DRA device) until the agent discovers "
                    "it again",
                    why));
      }
      const size_t before = model_.units.size();
      if (strategy != MigStrategy::kNone && !g.mig_mode_error.empty()) {
        // Whole, it may be a GPU in MIG mode, where a pod's CUDA finds no device.
        Warn(StrCat(what, " is not advertised: its MIG mode is unknown (", g.mig_mode_error,
                    ") and flags.migStrategy ", c_.flags.mig_strategy,
                    " must not hand out a MIG GPU whole"));
        continue;
      }
      // Read once per GPU, shared by its units.
      pcie_root_ = g.pci_bus_id.empty() ? "" : dra::ReadPcieRoot(c_.sysfs_root, g.pci_bus_id);
      if (strategy == MigStrategy::kNone || !g.mig_enabled) {
        if (g.mig_enabled) {
          Warn(StrCat(what, " is in MIG mode but flags.migStrategy is none: advertised whole"));
        }
        model_.units.push_back(Whole(pos));
      } else if (g.mig_devices.empty()) {
        model_.empty_mig_gpus.push_back(pos);
        model_.gpus.push_back(pos);
        Warn(StrCat(what, " is in MIG mode with no MIG devices: nothing of it is advertised"));
      } else {
        for (size_t m = 0; m < g.mig_devices.size(); ++m) AddMig(pos, m);
      }
      if (model_.units.size() > before) {
        model_.gpus.push_back(pos);
        model_.gpu_uuids.push_back(g.uuid);
        // Only a lost GPU starts out unhealthy; any other failed query (no
        // privilege for one value, say) leaves a GPU that works.
        if (g.lost) model_.initially_unhealthy.insert(g.uuid);
      }
    }
    return std::move(model_);
  }

 private:
  void Warn(std::string w) { model_.warnings.push_back(std::move(w)); }

  DeviceUnit Common(size_t pos) {
    const nvml::GpuRecord& g = inv_.gpus[pos];
    DeviceUnit u;
    u.gpu_pos = pos;
    u.key = DeviceKey::Gpu(g.uuid);
    if (g.minor >= 0) u.parent_node = StrCat("/dev/nvidia", g.minor);
    u.lost = g.lost;
    u.pcie_root = pcie_root_;
    return u;
  }

  DeviceUnit Whole(size_t pos) {
    const nvml::GpuRecord& g = inv_.gpus[pos];
    DeviceUnit u = Common(pos);
    u.uuid = g.uuid;
    u.index = StrCat(g.index);
    u.name = dra::GpuDeviceName(g);
    u.resource = c_.resource_name;
    return u;
  }

  void AddMig(size_t pos, size_t m) {
    const nvml::GpuRecord& g = inv_.gpus[pos];
    const nvml::MigRecord& mig = g.mig_devices[m];
    const std::string profile = nvml::MigProfileName(g, mig);
    if (profile.empty() || mig.uuid.empty()) {
      Warn(StrCat("MIG device ", g.index, ":", mig.index, " (",
                  mig.uuid.empty() ? "no UUID" : mig.uuid, ") has no profile name (NVML gave ",
                  mig.gpu_instance_slices, " GPU slices, ", mig.memory_mib,
                  " MiB): not advertised"));
      return;
    }
    DeviceUnit u = Common(pos);
    u.mig_pos = static_cast<int>(m);
    u.uuid = mig.uuid;
    u.index = StrCat(g.index, ":", mig.index);
    u.profile = profile;
    u.resource = c_.flags.mig() == MigStrategy::kSingle ? c_.resource_name
                                                        : StrCat(kMigResourcePrefix, profile);
    u.name = dra::MigDeviceName(dra::GpuDeviceName(g), profile, mig.gpu_instance_id,
                                mig.compute_instance_id);
    u.key.gpu_instance = static_cast<int>(mig.gpu_instance_id);
    u.key.compute_instance = static_cast<int>(mig.compute_instance_id);
    if (!minors_) minors_ = nvml::MigMinors::Read(c_.proc_root);
    if (!minors_->ok()) {
      u.capability_error = absl::Status(
          minors_->status().code(), StrCat(u.Describe(), " needs its capability device nodes, ",
                                           "listed in mig-minors: ", minors_->status().message()));
    } else {
      absl::StatusOr<std::vector<std::string>> caps =
          (*minors_)->DeviceNodes(g.minor, static_cast<int>(mig.gpu_instance_id),
                                  static_cast<int>(mig.compute_instance_id));
      if (caps.ok()) {
        u.capability_nodes = *std::move(caps);
      } else {
        u.capability_error =
            absl::Status(caps.status().code(), StrCat(u.Describe(), ": ", caps.status().message()));
      }
    }
    model_.units.push_back(std::move(u));
  }

  const Config& c_;
  const nvml::Inventory& inv_;
  DeviceModel model_;
  std::optional<absl::StatusOr<nvml::MigMinors>> minors_;  // read at the first MIG device
  std::string pcie_root_;  // the PCIe root of the GPU being expanded
};

}  // namespace

DeviceModel BuildDeviceModel(const Config& config, const nvml::Inventory& inventory,
                             const GpuChoice& choice) {
  DeviceModel model = ModelBuilder(config, inventory).Run(choice);
  ApplyTimeSlicing(config, inventory, &model);
  return model;
}

}  // namespace gpu_agent
