// The fixture that drives the libnvidia-ml stand-in: a node's GPUs, their
// topology, MIG instances and failure modes. Format: tests/fixtures/nvml/README.md.
#ifndef GPU_AGENT_TESTS_FAKE_NVML_FIXTURE_H_
#define GPU_AGENT_TESTS_FAKE_NVML_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fake_nvml {

struct MigFixture {
  std::string uuid;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  uint64_t memory_mib = 0;
  unsigned gpu_instance_slices = 1;
  unsigned compute_instance_slices = 1;
  unsigned multiprocessors = 0;
  unsigned decoders = 0, encoders = 0, jpegs = 0, ofas = 0;  // shared engine counts
};

// A GPU-instance profile the GPU offers in MIG mode.
struct ProfileFixture {
  unsigned profile = 0;  // NVML_GPU_INSTANCE_PROFILE_* index (0 ... 16)
  unsigned id = 0;       // the profile's id on the GPU
  std::string name;      // "MIG 1g.10gb"
  unsigned slices = 1;
  unsigned instances = 1;
  unsigned multiprocessors = 0;
  uint64_t memory_mib = 0;
  unsigned decoders = 0, encoders = 0, jpegs = 0, ofas = 0;
};

// A GPU's multi-node NVLink fabric registration (nvmlDeviceGetGpuFabricInfo[V]).
struct FabricFixture {
  unsigned char cluster_uuid[16] = {};
  unsigned clique_id = 0;
  unsigned state = 3;  // NVML_GPU_FABRIC_STATE_*: 3 completed
  int status = 0;      // nvmlReturn_t
};

// What the health-check queries answer for a GPU (tests/fixtures/nvml/README.md,
// "Health"): defaults are a healthy, idle GPU with ECC on.
struct HealthFixture {
  bool row_remapping = true;     // false: nvmlDeviceGetRemappedRows NOT_SUPPORTED (before Ampere)
  bool ecc = true;               // nvmlDeviceGetEccMode's current mode
  uint64_t ecc_uncorrected = 0;  // volatile uncorrectable ECC errors
  unsigned temperature = 40, slowdown_temperature = 87, shutdown_temperature = 92;
  uint64_t clock_event_reasons = 0x1;  // nvmlClocksEventReasonGpuIdle
  unsigned pcie_width = 16, pcie_max_width = 16, pcie_generation = 4, pcie_max_generation = 4;
  unsigned pcie_replays = 0;
  // NVML_FI_DEV_NVLINK_GET_STATE answered through nvmlDeviceGetFieldValues
  // (Hopper and later); false: NOT_SUPPORTED for that field.
  bool nvlink_state_field = true;
  std::vector<unsigned> nvlinks_down;  // link slots that read inactive
};

struct GpuFixture {
  std::string uuid;
  std::string name;
  uint64_t memory_mib = 0;
  unsigned minor = 0;
  std::string pci_bus_id;  // "00000000:BB:DD.F"
  uint32_t pci_device_id = 0;
  uint32_t pci_subsystem_id = 0;
  int numa_node = -1;
  uint32_t pci_class = 0x030200;  // sysfs only (fake-nvml-tool sysfs): a 3D controller
  int pcie_switch = -1;           // GPUs on the same switch are NVML_TOPOLOGY_SINGLE apart
  int host_bridge = -1;           // same host bridge: NVML_TOPOLOGY_HOSTBRIDGE
  int cc_major = 0, cc_minor = 0;
  unsigned architecture = 0xffffffff;
  int brand = 0;
  bool mig_enabled = false;
  unsigned max_mig_devices = 7;
  std::vector<MigFixture> mig_devices;
  std::vector<ProfileFixture> mig_profiles;
  bool lost = false;
  // No fabric: the fabric functions answer NOT_SUPPORTED.
  bool has_fabric = false;
  FabricFixture fabric;
  // What a reset clears: the driver's recovery action, a pending row remap
  // (or remap failure), pending page retirements.
  unsigned recovery_action = 0;
  bool remap_pending = false;
  bool remap_failed = false;
  bool pages_pending = false;
  HealthFixture health;
  // Function name -> NVML return code that function answers for this GPU.
  std::map<std::string, int> failures;
};

struct NvLinkFixture {
  unsigned a = 0, b = 0;
  unsigned links = 1;
};

struct Fixture {
  std::string driver_version = "550.54.15";
  std::string nvml_version = "12.550.54.15";
  int cuda_driver_version = 12040;
  int init_error = 0;
  // false: the process runs unprivileged (a container without
  // CAP_SYS_ADMIN), and NVML answers NO_PERMISSION where it needs privilege:
  // the memory of a MIG-enabled GPU.
  bool privileged = true;
  std::vector<GpuFixture> gpus;
  std::vector<NvLinkFixture> nvlinks;
  // Links per GPU: 18 on Hopper, the value of NVML_NVLINK_MAX_LINKS in the
  // nvml.h the agent was written from; later GPUs have more.
  unsigned nvlink_slots = 18;
  // The system's DMI product name, for fake-nvml-tool sysfs; empty: no DMI.
  std::string product_name;
};

// Sets one health field of `gpu` by its fixture name (the keys of
// README.md's "Health", and recoveryAction, remapPending, remapFailed,
// pagesPending) from text, as the fixture file and the control FIFO's
// "set" command give it. False with `error` set on an unknown name or a
// bad value.
bool SetGpuField(GpuFixture* gpu, const std::string& name, const std::string& value,
                 std::string* error);
// The names SetGpuField takes.
const std::vector<std::string>& GpuFieldNames();

// Parses and checks a fixture file. On failure returns false and sets
// `error` to "<file>:<line>:<column>: <what is wrong>".
bool LoadFixture(const std::string& path, Fixture* out, std::string* error);

// nvmlErrorString's text for an NVML return code, as NVIDIA's library words
// it ("Unknown Error" for a code it does not know).
const char* ErrorText(int code);

// One GPU or MIG device of a fixture, as both NVML doubles (the dlopen
// stand-in and the in-process fake) hand out handles to it. `Self` is the
// double's own device type, deriving from this (NVML's handle type names it).
template <typename Self>
struct DeviceNode {
  bool is_mig = false;
  unsigned index = 0;  // GPU index, or MIG slot under the parent
  Self* parent = nullptr;
  GpuFixture gpu;  // for GPUs
  MigFixture mig;  // for MIG devices
  std::vector<std::unique_ptr<Self>> mig_children;
  std::vector<int> link_peer;  // NVLink slot -> peer GPU index, -1 unused
};

// The fixture's GPUs with their MIG devices; each NVLink takes the next free
// slot on both of its ends, in the fixture's order.
template <typename Self>
std::vector<std::unique_ptr<Self>> BuildDeviceTree(const Fixture& f) {
  std::vector<std::unique_ptr<Self>> gpus;
  for (size_t i = 0; i < f.gpus.size(); ++i) {
    auto dev = std::make_unique<Self>();
    dev->index = static_cast<unsigned>(i);
    dev->gpu = f.gpus[i];
    dev->link_peer.assign(f.nvlink_slots, -1);
    for (size_t m = 0; m < dev->gpu.mig_devices.size(); ++m) {
      auto mig = std::make_unique<Self>();
      mig->is_mig = true;
      mig->index = static_cast<unsigned>(m);
      mig->parent = dev.get();
      mig->mig = dev->gpu.mig_devices[m];
      dev->mig_children.push_back(std::move(mig));
    }
    gpus.push_back(std::move(dev));
  }
  for (const NvLinkFixture& nl : f.nvlinks) {
    for (unsigned k = 0; k < nl.links; ++k) {
      auto& a = gpus[nl.a]->link_peer;
      auto& b = gpus[nl.b]->link_peer;
      auto fa = std::find(a.begin(), a.end(), -1);
      auto fb = std::find(b.begin(), b.end(), -1);
      if (fa == a.end() || fb == b.end()) break;
      *fa = static_cast<int>(nl.b);
      *fb = static_cast<int>(nl.a);
    }
  }
  return gpus;
}

}  // namespace fake_nvml

#endif  // GPU_AGENT_TESTS_FAKE_NVML_FIXTURE_H_
