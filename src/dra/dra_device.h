// A device as a DRA driver publishes it: a DNS-label name in the pool
// (gpu-0000-3b-00-0, gpu-0000-3b-00-0-mig-1g-10gb-3-0), typed attributes and
// capacity, the health key, and the UUID under which the node's CDI spec
// holds its edits. Built from plain inventory records.
#ifndef GPU_AGENT_DRA_DRA_DEVICE_H_
#define GPU_AGENT_DRA_DRA_DEVICE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/device_key.h"
#include "nvml/inventory.h"

namespace gpu_agent::dra {

// One attribute value; exactly one of the API's int, bool, string, version.
struct AttributeValue {
  enum class Type { kInt, kBool, kString, kVersion };
  Type type = Type::kString;
  int64_t number = 0;  // kInt
  bool flag = false;   // kBool
  std::string text;    // kString, kVersion (semantic version)

  static AttributeValue Int(int64_t v) { return {Type::kInt, v, false, ""}; }
  static AttributeValue Bool(bool v) { return {Type::kBool, 0, v, ""}; }
  static AttributeValue String(std::string v) { return {Type::kString, 0, false, std::move(v)}; }
  static AttributeValue Version(std::string v) { return {Type::kVersion, 0, false, std::move(v)}; }
  friend bool operator==(const AttributeValue&, const AttributeValue&) = default;
};

// How claims share a device (sharing.timeSlicing's replicas), published
// where the API server serves consumable capacity (DRAConsumableCapacity):
// the device allows multiple allocations, each claim consuming `shares` of
// it (one unless it asks more, at most `most_per_claim`), and of each other
// capacity its share (`per_share`, at least that much; a claim may reserve
// more, up to all of it), so that a claim that names none takes its share
// of it rather than all of it.
struct DeviceSharing {
  int shares = 1;  // 1: not shared, one claim at a time
  int most_per_claim = 1;
  std::map<std::string, std::string> per_share;  // capacity name -> quantity
  bool shared() const { return shares > 1; }
  friend bool operator==(const DeviceSharing&, const DeviceSharing&) = default;
};

// The consumable capacity a shared device has beside its others: how many
// claims' worth of it are left.
inline constexpr char kSharesCapacity[] = "shares";
// The most shares a device has (sharing.timeSlicing's most replicas), and
// so the most a claim's result can consume of one.
inline constexpr int64_t kMaxShares = 1024;

struct DraDevice {
  std::string name;  // a DNS label, unique in the pool
  DeviceKey key;     // what health reports are about
  std::string uuid;  // the GPU's or MIG device's UUID (its name in the node's CDI spec)
  // Unqualified names are the driver's own; resource.kubernetes.io/... are
  // Kubernetes' standard ones.
  std::map<std::string, AttributeValue> attributes;
  std::map<std::string, std::string> capacity;  // name -> quantity ("80Gi", "9856Mi", "98")
  DeviceSharing sharing;
  friend bool operator==(const DraDevice&, const DraDevice&) = default;
};

// One device: a whole GPU (`mig` null) or one of its MIG devices, named
// `name` (GpuDeviceName, MigDeviceName) with MIG profile `profile`, under the
// PCIe root `pcie_root` ("pci0000:00"; "" when unknown), shared by at most
// `shares` claims (1: not shared), each taking at most `most_per_claim` of
// them. Which devices there are is the device model's to say
// (agent/plan/device_model.h).
DraDevice BuildDevice(const nvml::Inventory& inventory, const nvml::GpuRecord& gpu,
                      const nvml::MigRecord* mig, std::string name, const std::string& profile,
                      const std::string& pcie_root, int shares = 1, int most_per_claim = 1);

// Names the kubelet, the scheduler and claims use, DNS labels (lowercase
// letters, digits, '-', at most 63), that stay with the device across
// reboots, driver reloads, drains and rebinds, which renumber NVML's
// indexes and can renumber minors: a GPU is named after its PCI address,
// "gpu-0000-3b-00-0" (its UUID, "gpu-<uuid>", where NVML gives none); a
// MIG device after its GPU, its profile and its GPU and compute instance
// ids, "gpu-0000-3b-00-0-mig-1g-10gb-3-0".
std::string GpuDeviceName(const nvml::GpuRecord& gpu);
std::string MigDeviceName(const std::string& gpu_name, const std::string& profile,
                          unsigned gpu_instance, unsigned compute_instance);

// `mib` MiB as the API server writes a quantity back (its canonical form:
// the largest binary suffix that keeps an integer): 81920 -> "80Gi", 9856
// -> "9856Mi", 0 -> "0". Published so, a slice read back compares equal to
// what the agent wants, and is not taken for someone else's change.
std::string MebibyteQuantity(uint64_t mib);

// `n` as the API server writes a decimal quantity back (its canonical
// form: the largest of k, M, G, T, P, E that keeps an integer): 1000 ->
// "1k", 1024 -> "1024", 4 -> "4".
std::string DecimalQuantity(int64_t n);

// A quantity that is a whole number from 0, plain or with a decimal suffix
// ("4", "1k"): its value; -1 for anything else (a fraction, a binary
// suffix, a sign, past 2^53).
int64_t WholeQuantity(std::string_view q);

// A version as semantic versioning requires it: "12.2" -> "12.2.0",
// "535.129.03" -> "535.129.3"; "" when `v` is not one to three numbers.
std::string SemanticVersion(const std::string& v);

// The root complex above a PCI device, from sysfs's device link
// (<sysfs_root>/bus/pci/devices/<bdf> -> .../devices/pci0000:00/...):
// "pci0000:00"; "" when it cannot be read.
std::string ReadPcieRoot(const std::string& sysfs_root, const std::string& nvml_bus_id);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_DRA_DEVICE_H_
