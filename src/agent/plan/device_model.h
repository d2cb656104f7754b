// The device model: the chosen GPUs expanded once into units, each a thing a
// container can be given (a whole GPU or one MIG device), carrying what every
// consumer needs. The device plugin's resource plan, the CDI spec, DRA's
// devices, static mode's counts and health's GPU list are projections of this
// one list, so they cannot disagree about which devices exist: a device DRA
// publishes has its CDI entry, an ID Allocate returns has its CDI name, static
// mode counts what plugin mode serves.
//
// A unit that cannot be served is left out of every projection with one
// warning naming it: a GPU without UUID, a GPU without device minor (but one
// lost at discovery, kept unhealthy so that a reset brings it back), a GPU whose MIG mode
// is unknown under a MIG strategy, a MIG device without UUID or profile name.
// Rules of one consumer (migStrategy single's "all or nothing") stay with
// that consumer's projection. Time-slicing replicas are the model's
// (time_slicing.h): each unit says how many replicas it is advertised as,
// and the device plugin's projection and the labels read that; DRA serves
// no replicas.
#ifndef GPU_AGENT_AGENT_PLAN_DEVICE_MODEL_H_
#define GPU_AGENT_AGENT_PLAN_DEVICE_MODEL_H_

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/config/config.h"
#include "agent/config/device_selection.h"
#include "base/device_key.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct DeviceUnit {
  size_t gpu_pos = 0;  // the GPU's position in the inventory
  int mig_pos = -1;    // position in the GPU's mig_devices; -1: the whole GPU
  std::string uuid;    // the GPU's or MIG device's UUID
  std::string index;   // "3" or "3:1" (GPU index, MIG index), NVML's order
  // A DNS label that stays with the device across reboots and renumbering:
  // the DRA device's name (dra/dra_device.h).
  std::string name;
  std::string profile;  // the MIG profile ("1g.10gb"); "" for a whole GPU
  DeviceKey key;        // what health reports are about
  // "/dev/nvidia<minor>"; "" only for a GPU lost at discovery whose minor
  // NVML did not give (no device node to pass, no CDI entry: has_cdi_entry).
  std::string parent_node;
  // A MIG device's capability nodes (/dev/nvidia-caps/...), read from the
  // driver's mig-minors file; when it could not be read or does not list
  // this device, `capability_error` says why, naming the device and the
  // file, and a consumer that needs them fails with it.
  std::vector<std::string> capability_nodes;
  absl::Status capability_error;
  std::string pcie_root;  // "pci0000:00" from sysfs; "" when unknown
  bool lost = false;      // NVML said GPU_IS_LOST at discovery
  // The extended resource the device plugin and static mode advertise it
  // under: flags.resourceName for a whole GPU and, under migStrategy single,
  // a MIG device; "nvidia.com/mig-<profile>" under mixed.
  std::string resource;
  // sharing.timeSlicing: the number of replicas it is advertised as, each a
  // device of its own (under its resource's TimeSlicedResource); 1: not
  // shared, advertised whole under `resource`.
  int replicas = 1;

  bool is_mig() const { return mig_pos >= 0; }
  // Whether the CDI spec has an entry for it, so that Allocate or DRA's
  // prepare can name it by CDI: only a unit with a device node has one.
  // The CDI and DRA projections (cdi_plan.h, dra_plan.h) ask this, not
  // parent_node; DRA publishes only units that have one.
  bool has_cdi_entry() const { return !parent_node.empty(); }
  const nvml::GpuRecord& gpu(const nvml::Inventory& inv) const { return inv.gpus[gpu_pos]; }
  // Null for a whole GPU.
  const nvml::MigRecord* mig(const nvml::Inventory& inv) const {
    return is_mig() ? &inv.gpus[gpu_pos].mig_devices[static_cast<size_t>(mig_pos)] : nullptr;
  }
  // "GPU 3 (GPU-...)" or "MIG device 3:1 (MIG-...)", for messages.
  std::string Describe() const;
  // The device ID of its replica `n` given its own ID `id` (UUID or index,
  // per deviceIDStrategy): "<id>::<n>" when it has replicas, `id` when not.
  std::string ReplicaId(const std::string& id, int n) const;
};

// A resource sharing.timeSlicing shares: its shared units' replicas are
// advertised as `shared_resource` (its rename, or itself), the rest whole
// under `resource`.
struct TimeSlicedResource {
  std::string resource;
  std::string shared_resource;
  int replicas = 1;
  // sharing.timeSlicing.failRequestsGreaterThanOne: one replica a request.
  bool one_per_request = false;
};

struct DeviceModel {
  std::vector<DeviceUnit> units;  // inventory order; a GPU's MIG devices in their order
  // The physical GPUs with at least one unit, inventory order: what health
  // watches.
  std::vector<std::string> gpu_uuids;
  std::set<std::string> initially_unhealthy;  // of gpu_uuids, NVML called lost
  // The chosen GPUs the model keeps, by inventory position, in the choice's
  // order: those with a unit and those of empty_mig_gpus. What the labels
  // describe; a GPU left out here (no UUID; no minor, not lost; MIG mode
  // unknown under a MIG strategy) is labelled no more than it is served.
  std::vector<size_t> gpus;
  // GPUs in MIG mode under a MIG strategy that have no MIG device (nothing of
  // them is a unit), by inventory position.
  std::vector<size_t> empty_mig_gpus;
  std::vector<std::string> warnings;  // one per unit or GPU left out
  // Time-slicing, by resource in the units' order (with no unit at all, the
  // main resource's). A sharing entry the node cannot satisfy (naming no
  // device, sharing a part under the same name, too many replicas) sets
  // sharing_error and no replicas past it; sharing_warnings are what only
  // deserves a word. Both are the device plugin's projection's to report.
  std::vector<TimeSlicedResource> time_sliced;
  absl::Status sharing_error;
  std::vector<std::string> sharing_warnings;

  // How `resource` is time-sliced; null when it is not.
  const TimeSlicedResource* TimeSlicingOf(const std::string& resource) const;
};

// Units grouped by the resource they are advertised under: the group of
// `groups` (each with a `resource` member) for `resource`, appended when
// there is none yet, so groups keep the order their resources first appear
// in. Time-slicing (time_slicing.cc) and the device plugin's projection
// (resource_plan.cc) group the units this way, each with its own group.
template <typename Group>
Group& GroupFor(std::vector<Group>& groups, const std::string& resource) {
  for (Group& g : groups) {
    if (g.resource == resource) return g;
  }
  groups.push_back(Group{resource, {}});
  return groups.back();
}

// Expands `choice` per flags.migStrategy: under none every GPU is one unit;
// under single or mixed a GPU in MIG mode is its MIG devices; then applies
// sharing.timeSlicing to the units' resources. Reads the
// mig-minors file under proc_root (only where MIG devices are) and each
// GPU's PCIe root under sysfs_root; neither failing stops the model.
DeviceModel BuildDeviceModel(const Config& config, const nvml::Inventory& inventory,
                             const GpuChoice& choice);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_DEVICE_MODEL_H_
