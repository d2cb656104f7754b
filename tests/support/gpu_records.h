// Hand-made NVML inventory records for tests of the plan and the generation:
// each case states exactly what the node has.
#ifndef GPU_AGENT_TESTS_SUPPORT_GPU_RECORDS_H_
#define GPU_AGENT_TESTS_SUPPORT_GPU_RECORDS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "nvml/inventory.h"

namespace gpu_agent::testing {

// An A100 80 GB, minor = index, UUID "GPU-<index>aaa".
inline nvml::GpuRecord Gpu(unsigned index, std::string name = "NVIDIA A100-SXM4-80GB",
                           uint32_t pci = 0x20b210de) {
  nvml::GpuRecord g;
  g.index = index;
  g.uuid = StrCat("GPU-", index, "aaa");
  g.name = std::move(name);
  g.memory_mib = 81920;
  g.minor = static_cast<int>(index);
  g.pci_device_id = pci;
  return g;
}

inline nvml::MigRecord Mig(unsigned index, unsigned gi, unsigned slices, uint64_t mib,
                           const std::string& uuid) {
  nvml::MigRecord m;
  m.index = index;
  m.uuid = uuid;
  m.gpu_instance_id = gi;
  m.compute_instance_id = 0;
  m.gpu_instance_slices = slices;
  m.compute_instance_slices = slices;
  m.memory_mib = mib;
  return m;
}

// GPU 0 in MIG mode (2g.20gb, 1g.10gb, 1g.10gb: GPU instances 1, 2, 3), GPU 1 whole.
inline nvml::Inventory MixedNode() {
  nvml::Inventory inv;
  nvml::GpuRecord g0 = Gpu(0);
  g0.mig_enabled = true;
  g0.mig_devices = {Mig(0, 1, 2, 19968, "MIG-a"), Mig(1, 2, 1, 9856, "MIG-b"),
                    Mig(2, 3, 1, 9856, "MIG-c")};
  inv.gpus = {g0, Gpu(1)};
  inv.links.assign(2, std::vector<nvml::GpuLink>(2));
  return inv;
}

// Two GPUs, both MIG with two 1g.10gb each (GPU instances 1 and 2).
inline nvml::Inventory AllMigNode() {
  nvml::Inventory inv;
  for (unsigned i = 0; i < 2; ++i) {
    nvml::GpuRecord g = Gpu(i);
    g.mig_enabled = true;
    g.mig_devices = {Mig(0, 1, 1, 9856, StrCat("MIG-", i, "x")),
                     Mig(1, 2, 1, 9856, StrCat("MIG-", i, "y"))};
    inv.gpus.push_back(g);
  }
  return inv;
}

inline nvml::Inventory PlainNode(unsigned n) {
  nvml::Inventory inv;
  for (unsigned i = 0; i < n; ++i) inv.gpus.push_back(Gpu(i));
  return inv;
}

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_GPU_RECORDS_H_
