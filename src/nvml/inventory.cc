#include "nvml/inventory.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>

#include "base/log.h"
#include "base/strings.h"
#include "nvml/mig_profile.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::nvml {
namespace {

// Links probed per GPU. nvml.h's NVML_NVLINK_MAX_LINKS was 6, 12, then 18;
// NVML answers INVALID_ARGUMENT past a GPU's last link.
constexpr unsigned kNvLinkProbeLimit = 36;

std::string BusIdOf(const nvmlPciInfo_t& pci) {
  // From the numeric fields, at the same offsets in every version of the
  // struct (the string moved); a GPU is always function 0.
  char out[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  std::snprintf(out, sizeof out, "%08X:%02X:%02X.0", pci.domain, pci.bus & 0xFF, pci.device & 0x1F);
  return out;
}

const char* BrandName(nvmlBrandType_t b) {
  switch (b) {
    case NVML_BRAND_QUADRO:
      return "Quadro";
    case NVML_BRAND_TESLA:
      return "Tesla";
    case NVML_BRAND_GEFORCE:
      return "GeForce";
    case NVML_BRAND_TITAN:
      return "Titan";
    case NVML_BRAND_NVIDIA:
      return "NVIDIA";
    case NVML_BRAND_NVIDIA_RTX:
      return "NVIDIA RTX";
    default:
      return "";
  }
}

// Collects the first error of a GPU's queries; later ones are only logged.
class ErrorSink {
 public:
  explicit ErrorSink(GpuRecord* gpu) : gpu_(gpu) {}
  // Records the first failed query; GPU_IS_LOST also marks the GPU lost.
  bool Ok(const NvmlLibrary& lib, nvmlReturn_t r, std::string_view what) {
    if (r == NVML_SUCCESS) return true;
    if (r == NVML_ERROR_GPU_IS_LOST) gpu_->lost = true;
    if (gpu_->error.empty()) gpu_->error = std::string(lib.Check(r, what).message());
    return false;
  }

 private:
  GpuRecord* gpu_;
};

void ReadMigDevices(const NvmlLibrary& lib, nvmlDevice_t parent, GpuRecord* gpu) {
  const NvmlFunctions& f = lib.fn();
  if (!f.DeviceGetMigMode || !f.DeviceGetMaxMigDeviceCount || !f.DeviceGetMigDeviceHandleByIndex) {
    return;
  }
  unsigned current = 0, pending = 0;
  nvmlReturn_t r = f.DeviceGetMigMode(parent, &current, &pending);
  if (r == NVML_ERROR_NOT_SUPPORTED) return;  // pre-Ampere GPUs
  ErrorSink sink(gpu);
  if (!sink.Ok(lib, r, "nvmlDeviceGetMigMode")) {
    // Not "MIG off": the planner must not hand such a GPU out whole.
    if (r != NVML_ERROR_GPU_IS_LOST) {
      gpu->mig_mode_error = std::string(lib.Check(r, "nvmlDeviceGetMigMode").message());
    }
    return;
  }
  gpu->mig_capable = true;
  gpu->mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
  if (!gpu->mig_enabled) return;
  gpu->mig_profiles = ReadGpuInstanceProfiles(lib, parent);
  unsigned max_count = 0;
  if (!sink.Ok(lib, f.DeviceGetMaxMigDeviceCount(parent, &max_count),
               "nvmlDeviceGetMaxMigDeviceCount")) {
    return;
  }
  for (unsigned i = 0; i < max_count; ++i) {
    nvmlDevice_t mig = nullptr;
    r = f.DeviceGetMigDeviceHandleByIndex(parent, i, &mig);
    if (r == NVML_ERROR_NOT_FOUND) continue;  // an empty slot
    if (!sink.Ok(lib, r, StrCat("nvmlDeviceGetMigDeviceHandleByIndex(", i, ")"))) {
      continue;
    }
    MigRecord rec;
    rec.index = i;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (sink.Ok(lib, f.DeviceGetUUID(mig, uuid, sizeof uuid), "MIG nvmlDeviceGetUUID")) {
      rec.uuid = uuid;
    }
    if (f.DeviceGetGpuInstanceId) {
      (void)sink.Ok(lib, f.DeviceGetGpuInstanceId(mig, &rec.gpu_instance_id),
                    "nvmlDeviceGetGpuInstanceId");
    }
    if (f.DeviceGetComputeInstanceId) {
      (void)sink.Ok(lib, f.DeviceGetComputeInstanceId(mig, &rec.compute_instance_id),
                    "nvmlDeviceGetComputeInstanceId");
    }
    if (f.DeviceGetAttributes) {
      nvmlDeviceAttributes_t attrs{};
      if (sink.Ok(lib, f.DeviceGetAttributes(mig, &attrs), "nvmlDeviceGetAttributes")) {
        rec.gpu_instance_slices = attrs.gpuInstanceSliceCount;
        rec.compute_instance_slices = attrs.computeInstanceSliceCount;
        rec.multiprocessors = attrs.multiprocessorCount;
        rec.memory_mib = attrs.memorySizeMB;
        rec.decoders = attrs.sharedDecoderCount;
        rec.encoders = attrs.sharedEncoderCount;
        rec.jpegs = attrs.sharedJpegCount;
        rec.ofas = attrs.sharedOfaCount;
        rec.copy_engines = attrs.sharedCopyEngineCount;
      }
    }
    gpu->mig_devices.push_back(std::move(rec));
  }
}

GpuRecord ReadGpu(const NvmlLibrary& lib, unsigned index, nvmlDevice_t dev,
                  const std::string& sysfs_root) {
  const NvmlFunctions& f = lib.fn();
  GpuRecord gpu;
  gpu.index = index;
  ErrorSink sink(&gpu);
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (sink.Ok(lib, f.DeviceGetUUID(dev, buf, sizeof buf), "nvmlDeviceGetUUID")) {
    gpu.uuid = buf;
  }
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (sink.Ok(lib, f.DeviceGetName(dev, name, sizeof name), "nvmlDeviceGetName")) {
    gpu.name = name;
  }
  nvmlMemory_t mem{};
  if (sink.Ok(lib, f.DeviceGetMemoryInfo(dev, &mem), "nvmlDeviceGetMemoryInfo")) {
    gpu.memory_mib = mem.total / (1024 * 1024);
  }
  unsigned minor = 0;
  if (sink.Ok(lib, f.DeviceGetMinorNumber(dev, &minor), "nvmlDeviceGetMinorNumber")) {
    gpu.minor = static_cast<int>(minor);
  }
  nvmlPciInfo_t pci{};
  if (sink.Ok(lib, f.DeviceGetPciInfo(dev, &pci), "nvmlDeviceGetPciInfo")) {
    gpu.pci_bus_id = BusIdOf(pci);
    gpu.pci_device_id = pci.pciDeviceId;
    gpu.numa_node = ReadNumaNode(sysfs_root, gpu.pci_bus_id);
    gpu.pci_class = ReadPciClass(sysfs_root, gpu.pci_bus_id);
  }
  (void)sink.Ok(lib, f.DeviceGetCudaComputeCapability(dev, &gpu.cc_major, &gpu.cc_minor),
                "nvmlDeviceGetCudaComputeCapability");
  if (f.DeviceGetArchitecture) {
    nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
    if (f.DeviceGetArchitecture(dev, &arch) == NVML_SUCCESS)
      gpu.architecture = ArchitectureName(arch);
  }
  if (f.DeviceGetBrand) {
    nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
    if (f.DeviceGetBrand(dev, &brand) == NVML_SUCCESS) gpu.brand = BrandName(brand);
  }
  ReadMigDevices(lib, dev, &gpu);
  gpu.fabric = ReadGpuFabric(lib, dev);
  if (!gpu.fabric.error.empty()) {
    LogWarning("GPU fabric info unreadable; no clique for this GPU",
               {{"index", StrCat(index)}, {"error", gpu.fabric.error}});
  }
  return gpu;
}

// Counts NVLinks from every GPU to every other GPU. Links that end at a
// device that is not one of the GPUs (an NVSwitch) are counted per GPU; two
// GPUs both on switches reach each other with the smaller of their counts.
void ReadNvLinks(const NvmlLibrary& lib, const std::vector<nvmlDevice_t>& handles, Inventory* inv) {
  const NvmlFunctions& f = lib.fn();
  if (!f.DeviceGetNvLinkState || !f.DeviceGetNvLinkRemotePciInfo) return;
  std::map<std::string, size_t> by_bus_id;
  for (size_t i = 0; i < inv->gpus.size(); ++i) {
    if (!inv->gpus[i].pci_bus_id.empty()) {
      by_bus_id[AsciiToLower(inv->gpus[i].pci_bus_id)] = i;
    }
  }
  std::vector<int> switch_links(handles.size(), 0);
  for (size_t i = 0; i < handles.size(); ++i) {
    if (handles[i] == nullptr) continue;
    // NVML_NVLINK_MAX_LINKS grows with each GPU generation (6, 12, 18):
    // probe past the header's value until NVML says there is no such link.
    for (unsigned link = 0; link < kNvLinkProbeLimit; ++link) {
      nvmlEnableState_t state = NVML_FEATURE_DISABLED;
      const nvmlReturn_t r = f.DeviceGetNvLinkState(handles[i], link, &state);
      // Past the GPU's last link; or no NVLink at all. A link that is
      // present but off (NOT_SUPPORTED further up) leaves a gap: go on.
      if (r == NVML_ERROR_INVALID_ARGUMENT || (r == NVML_ERROR_NOT_SUPPORTED && link == 0)) break;
      if (r != NVML_SUCCESS || state != NVML_FEATURE_ENABLED) continue;
      nvmlPciInfo_t remote{};
      if (f.DeviceGetNvLinkRemotePciInfo(handles[i], link, &remote) != NVML_SUCCESS) continue;
      auto it = by_bus_id.find(AsciiToLower(BusIdOf(remote)));
      if (it == by_bus_id.end()) {
        ++switch_links[i];
      } else if (it->second != i) {
        // Each side reports the link; count it from the lower index only.
        if (i < it->second) {
          ++inv->links[i][it->second].nvlinks;
          ++inv->links[it->second][i].nvlinks;
        }
      }
    }
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    for (size_t j = i + 1; j < handles.size(); ++j) {
      const int via_switch = std::min(switch_links[i], switch_links[j]);
      if (via_switch > 0) {
        inv->links[i][j].nvlinks += via_switch;
        inv->links[j][i].nvlinks += via_switch;
      }
    }
  }
}

}  // namespace

const char* ArchitectureName(nvmlDeviceArchitecture_t a) {
  switch (a) {
    case NVML_DEVICE_ARCH_KEPLER:
      return "kepler";
    case NVML_DEVICE_ARCH_MAXWELL:
      return "maxwell";
    case NVML_DEVICE_ARCH_PASCAL:
      return "pascal";
    case NVML_DEVICE_ARCH_VOLTA:
      return "volta";
    case NVML_DEVICE_ARCH_TURING:
      return "turing";
    case NVML_DEVICE_ARCH_AMPERE:
      return "ampere";
    case NVML_DEVICE_ARCH_ADA:
      return "ada";
    case NVML_DEVICE_ARCH_HOPPER:
      return "hopper";
    case NVML_DEVICE_ARCH_BLACKWELL:
      return "blackwell";
    default:
      return "";
  }
}

std::string SysfsPciAddress(const std::string& nvml_bus_id) {
  // NVML writes an 8-digit domain, sysfs at least 4 digits: 0000:3b:00.0,
  // and 10000:3b:00.0 for a domain above 0xFFFF (VMD, some hypervisors).
  std::string id = AsciiToLower(nvml_bus_id);
  const size_t colon = id.find(':');
  if (colon == std::string::npos || colon == 0) return id;
  size_t digits = 0;
  while (digits < colon && id[digits] == '0') ++digits;
  const size_t kept = std::max<size_t>(4, colon - digits);
  return id.substr(colon - std::min(kept, colon));
}

int ReadNumaNode(const std::string& sysfs_root, const std::string& nvml_bus_id) {
  std::ifstream in(
      StrCat(sysfs_root, "/bus/pci/devices/", SysfsPciAddress(nvml_bus_id), "/numa_node"));
  std::string text;
  if (!in || !std::getline(in, text)) return -1;
  int node = -1;
  if (!ParseInt(StripWhitespace(text), &node) || node < 0) return -1;
  return node;
}

uint32_t ReadPciClass(const std::string& sysfs_root, const std::string& nvml_bus_id) {
  std::ifstream in(StrCat(sysfs_root, "/bus/pci/devices/", SysfsPciAddress(nvml_bus_id), "/class"));
  std::string text;
  if (!in || !std::getline(in, text)) return 0;
  text = std::string(StripWhitespace(text));
  if (text.size() < 3 || text.size() > 10 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) {
    return 0;
  }
  uint32_t value = 0;
  for (size_t i = 2; i < text.size(); ++i) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    if (!std::isxdigit(static_cast<unsigned char>(c))) return 0;
    value = value * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return value;
}

std::string ReadMachineProduct(const std::string& sysfs_root) {
  std::ifstream in(StrCat(sysfs_root, "/devices/virtual/dmi/id/product_name"));
  if (!in) return "";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return std::string(StripWhitespace(text));
}

absl::StatusOr<Inventory> DiscoverInventory(const NvmlLibrary& lib, const std::string& sysfs_root) {
  const NvmlFunctions& f = lib.fn();
  Inventory inv;
  inv.machine_product = ReadMachineProduct(sysfs_root);
  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (f.SystemGetDriverVersion(text, sizeof text) == NVML_SUCCESS) inv.driver_version = text;
  char nvml_text[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
  if (f.SystemGetNVMLVersion &&
      f.SystemGetNVMLVersion(nvml_text, sizeof nvml_text) == NVML_SUCCESS) {
    inv.nvml_version = nvml_text;
  }
  int cuda = 0;
  if (f.SystemGetCudaDriverVersion && f.SystemGetCudaDriverVersion(&cuda) == NVML_SUCCESS &&
      cuda > 0) {
    inv.cuda_driver_version = StrCat(cuda / 1000, ".", (cuda % 1000) / 10);
  }
  unsigned count = 0;
  if (absl::Status s = lib.Check(f.DeviceGetCount(&count), "nvmlDeviceGetCount"); !s.ok()) {
    return s;
  }
  std::vector<nvmlDevice_t> handles(count, nullptr);
  for (unsigned i = 0; i < count; ++i) {
    const nvmlReturn_t r = f.DeviceGetHandleByIndex(i, &handles[i]);
    if (r != NVML_SUCCESS) {
      handles[i] = nullptr;
      GpuRecord gpu;
      gpu.index = i;
      gpu.error =
          std::string(lib.Check(r, StrCat("nvmlDeviceGetHandleByIndex(", i, ")")).message());
      gpu.lost = r == NVML_ERROR_GPU_IS_LOST;
      inv.gpus.push_back(std::move(gpu));
      continue;
    }
    inv.gpus.push_back(ReadGpu(lib, i, handles[i], sysfs_root));
  }
  for (const GpuRecord& gpu : inv.gpus) {
    if (!gpu.error.empty()) {
      LogWarning("GPU query failed; the GPU is listed with what could be read",
                 {{"index", StrCat(gpu.index)}, {"uuid", gpu.uuid}, {"error", gpu.error}});
    }
  }
  inv.links.assign(count, std::vector<GpuLink>(count));
  if (f.DeviceGetTopologyCommonAncestor) {
    for (unsigned i = 0; i < count; ++i) {
      for (unsigned j = i + 1; j < count; ++j) {
        if (!handles[i] || !handles[j]) continue;
        nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
        if (f.DeviceGetTopologyCommonAncestor(handles[i], handles[j], &level) == NVML_SUCCESS) {
          inv.links[i][j].pcie_level = inv.links[j][i].pcie_level = static_cast<int>(level);
        }
      }
    }
  }
  ReadNvLinks(lib, handles, &inv);
  return inv;
}

}  // namespace gpu_agent::nvml
