// What the node's GPUs are, read once through NVML (and sysfs for NUMA), as
// plain records. Nothing here is an NVML type, so callers can hand it on.
#ifndef GPU_AGENT_NVML_INVENTORY_H_
#define GPU_AGENT_NVML_INVENTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nvml/gpu_fabric.h"

namespace gpu_agent::nvml {

class NvmlLibrary;

struct MigRecord {
  unsigned index = 0;  // position under the parent (nvmlDeviceGetMigDeviceHandleByIndex)
  std::string uuid;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  uint64_t memory_mib = 0;
  unsigned gpu_instance_slices = 0;
  unsigned compute_instance_slices = 0;
  unsigned multiprocessors = 0;
  // Engines its GPU instance has (nvmlDeviceGetAttributes' shared counts):
  // they tell a media-extension profile (+me) from its plain twin.
  unsigned decoders = 0, encoders = 0, jpegs = 0, ofas = 0;
  unsigned copy_engines = 0;
};

// One GPU-instance profile a MIG-enabled GPU offers
// (nvmlDeviceGetGpuInstanceProfileInfo[V]), which NVML answers without
// privilege, unlike the GPU's memory in MIG mode.
struct GpuInstanceProfile {
  unsigned id = 0;  // the profile's id on this GPU
  unsigned slices = 0;
  uint64_t memory_mib = 0;
  unsigned decoders = 0, encoders = 0, jpegs = 0, ofas = 0;
  std::string name;  // NVML's, "MIG 1g.10gb"; empty from drivers before R510
};

struct GpuRecord {
  unsigned index = 0;
  std::string uuid;
  std::string name;
  uint64_t memory_mib = 0;
  int minor = -1;
  std::string pci_bus_id;      // NVML form, "00000000:07:00.0"
  uint32_t pci_device_id = 0;  // (device << 16) | vendor
  int numa_node = -1;          // -1: unknown or not NUMA
  // The PCI class code from sysfs (0x030200 a 3D controller, 0x030000 a
  // VGA controller); 0 when unreadable.
  uint32_t pci_class = 0;
  int cc_major = 0;
  int cc_minor = 0;
  std::string architecture;  // "hopper", "ampere", ... or ""
  std::string brand;
  // NVML answered nvmlDeviceGetMigMode (on or off): the GPU can do MIG.
  bool mig_capable = false;
  bool mig_enabled = false;
  // Set when nvmlDeviceGetMigMode failed (other than NOT_SUPPORTED or
  // GPU_IS_LOST): whether the GPU is in MIG mode is unknown.
  std::string mig_mode_error;
  std::vector<MigRecord> mig_devices;
  std::vector<GpuInstanceProfile> mig_profiles;  // only when MIG is enabled
  FabricRecord fabric;  // multi-node NVLink registration, where there is one
  // Non-empty when a query for this GPU failed; the fields it would have
  // filled stay at their defaults. The GPU is still listed, and served:
  // a query can fail for want of privilege (the memory of a MIG-enabled
  // GPU in an unprivileged container) on a GPU that works.
  std::string error;
  // A query answered GPU_IS_LOST: the GPU is off the bus. Only this starts
  // a GPU out as unhealthy.
  bool lost = false;
};

// How two GPUs reach each other. `pcie_level` is NVML's topology level
// (10 same board/switch ... 50 across CPU sockets), 0 when unknown.
struct GpuLink {
  int nvlinks = 0;
  int pcie_level = 0;
};

struct Inventory {
  std::string driver_version;
  std::string nvml_version;
  std::string cuda_driver_version;  // "12.2"
  // The system's product name (DMI), as sysfs gives it, trimmed; empty when
  // unreadable (no DMI: many ARM boards, some VMs).
  std::string machine_product;
  std::vector<GpuRecord> gpus;
  // links[i][j] for gpus[i], gpus[j]; symmetric; links[i][i] is unused.
  std::vector<std::vector<GpuLink>> links;
};

// Reads every GPU through `lib` (which must be initialised). A GPU whose
// queries fail is listed with `error` set; only failing to count the GPUs
// fails the whole call. NUMA nodes and PCI classes come from
// `<sysfs_root>/bus/pci/devices/<bdf>/`, the machine from DMI under sysfs.
absl::StatusOr<Inventory> DiscoverInventory(const NvmlLibrary& lib, const std::string& sysfs_root);

// "00000000:07:00.0" -> "0000:07:00.0", the name sysfs uses (a domain above
// 0xFFFF keeps its digits: "00010000:07:00.0" -> "10000:07:00.0").
std::string SysfsPciAddress(const std::string& nvml_bus_id);

// NVML's architecture as the agent names it ("hopper"); "" for one it does
// not know.
const char* ArchitectureName(nvmlDeviceArchitecture_t a);

// Reads the NUMA node of a PCI device from sysfs; -1 when absent or negative.
int ReadNumaNode(const std::string& sysfs_root, const std::string& nvml_bus_id);

// Reads a PCI device's class code (`<sysfs_root>/bus/pci/devices/<bdf>/class`,
// "0x030200"); 0 when absent or malformed.
uint32_t ReadPciClass(const std::string& sysfs_root, const std::string& nvml_bus_id);

// `<sysfs_root>/devices/virtual/dmi/id/product_name` (what /sys/class/dmi/id
// links to), whitespace-trimmed; empty when absent.
std::string ReadMachineProduct(const std::string& sysfs_root);

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_INVENTORY_H_
