// nvml-capture: asks a real NVML every question gpu-agent asks it and writes
// the answers as a fixture for the NVML stand-in (tests/fixtures/nvml), so
// the stand-in can be checked against a real driver: the same `gpu-agent
// devices` output from the driver and from the stand-in loaded with the
// capture. Each GPU's raw answers, errors included, are kept as comments.
//   nvml-capture [--driver-root DIR] [--sysfs-root DIR] OUT.yaml
// Reads only: never changes MIG mode, never resets a GPU.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nvml/inventory.h"
#include "nvml/nvml_library.h"

namespace {

using gpu_agent::nvml::NvmlFunctions;
using gpu_agent::nvml::NvmlLibrary;

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Hex(unsigned v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%0*x", width, v);
  return buf;
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "00000000:07:00.0" -> "0000:07:00.0", lower case, as sysfs names it.
std::string SysfsBdf(const std::string& bus_id) {
  std::string s = bus_id.size() > 8 && bus_id[8] == ':' ? bus_id.substr(4) : bus_id;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string UuidText(const unsigned char (&u)[16]) {
  char buf[40];
  std::snprintf(buf, sizeof(buf),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  return buf;
}

struct Capture {
  const NvmlLibrary& lib;
  const NvmlFunctions& f;
  std::ostringstream raw;           // "#   fn: answer" lines for the current GPU
  std::map<std::string, int> fail;  // function -> error other than NOT_SUPPORTED

  // Records one call's answer; true on success.
  // `value` describes the answer; called only after the call has been made.
  template <typename Value>
  bool Ok(const char* fn, nvmlReturn_t r, Value value) {
    if (r == NVML_SUCCESS) {
      raw << "#   " << fn << ": " << value() << "\n";
      return true;
    }
    raw << "#   " << fn << ": " << lib.ErrorText(r) << "\n";
    // NOT_SUPPORTED too: the stand-in answers the health queries unless told.
    if (r != NVML_ERROR_FUNCTION_NOT_FOUND) fail[fn] = r;
    return false;
  }
  void Missing(const char* fn) { raw << "#   " << fn << ": not exported by this driver\n"; }
};

struct Gpu {
  nvmlDevice_t handle = nullptr;
  std::string bus_id;
  std::string yaml;  // the fixture entry, without topology fields
  std::string raw;
};

int Main(int argc, char** argv) {
  std::string driver_root = "/", sysfs_root = "/sys", out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--driver-root" && i + 1 < argc) {
      driver_root = argv[++i];
    } else if (a == "--sysfs-root" && i + 1 < argc) {
      sysfs_root = argv[++i];
    } else if (!a.empty() && a[0] != '-' && out_path.empty()) {
      out_path = a;
    } else {
      std::fprintf(stderr, "usage: nvml-capture [--driver-root DIR] [--sysfs-root DIR] OUT.yaml\n");
      return 2;
    }
  }
  if (out_path.empty()) {
    std::fprintf(stderr, "usage: nvml-capture [--driver-root DIR] [--sysfs-root DIR] OUT.yaml\n");
    return 2;
  }
  auto lib_or = NvmlLibrary::Open(driver_root);
  if (!lib_or.ok()) {
    std::fprintf(stderr, "nvml-capture: %s\n", std::string(lib_or.status().message()).c_str());
    return 1;
  }
  NvmlLibrary& lib = **lib_or;
  if (absl::Status s = lib.Init(); !s.ok()) {
    std::fprintf(stderr, "nvml-capture: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const NvmlFunctions& f = lib.fn();
  std::ostringstream y;
  char buf[256];
  y << "# Captured by nvml-capture from " << lib.path() << "\n";
  std::string driver = "unknown";
  if (f.SystemGetDriverVersion(buf, sizeof(buf)) == NVML_SUCCESS) driver = buf;
  y << "driverVersion: " << Quote(driver) << "\n";
  if (f.SystemGetNVMLVersion(buf, sizeof(buf)) == NVML_SUCCESS) {
    y << "nvmlVersion: " << Quote(buf) << "\n";
  }
  int cuda = 0;
  if (f.SystemGetCudaDriverVersion(&cuda) == NVML_SUCCESS)
    y << "cudaDriverVersion: " << cuda << "\n";
  const std::string product = ReadLine(sysfs_root + "/devices/virtual/dmi/id/product_name");
  if (!product.empty()) y << "productName: " << Quote(product) << "\n";

  unsigned count = 0;
  if (nvmlReturn_t r = f.DeviceGetCount(&count); r != NVML_SUCCESS) {
    std::fprintf(stderr, "nvml-capture: nvmlDeviceGetCount_v2: %s\n", lib.ErrorText(r).c_str());
    return 1;
  }
  std::vector<Gpu> gpus(count);
  for (unsigned i = 0; i < count; ++i) {
    Capture c{lib, f, {}, {}};
    Gpu& g = gpus[i];
    std::ostringstream e;
    if (!c.Ok("nvmlDeviceGetHandleByIndex_v2", f.DeviceGetHandleByIndex(i, &g.handle),
              [&] { return std::string("ok"); })) {
      std::fprintf(stderr, "nvml-capture: GPU %u has no handle\n", i);
      return 1;
    }
    nvmlDevice_t d = g.handle;
    if (c.Ok("nvmlDeviceGetUUID", f.DeviceGetUUID(d, buf, sizeof(buf)),
             [&] { return std::string(buf); })) {
      e << "  - uuid: " << buf << "\n";
    } else {
      e << "  - uuid: GPU-00000000-0000-0000-0000-" << Hex(i, 12).substr(2) << "\n";
    }
    if (c.Ok("nvmlDeviceGetName", f.DeviceGetName(d, buf, sizeof(buf)),
             [&] { return std::string(buf); })) {
      e << "    name: " << Quote(buf) << "\n";
    }
    nvmlMemory_t mem{};
    if (c.Ok("nvmlDeviceGetMemoryInfo", f.DeviceGetMemoryInfo(d, &mem),
             [&] { return std::string(std::to_string(mem.total) + " bytes total"); })) {
      e << "    memoryMiB: " << mem.total / (1024 * 1024) << "\n";
    }
    unsigned minor = 0;
    if (c.Ok("nvmlDeviceGetMinorNumber", f.DeviceGetMinorNumber(d, &minor),
             [&] { return std::string(std::to_string(minor)); })) {
      e << "    minor: " << minor << "\n";
    }
    nvmlPciInfo_t pci{};
    if (c.Ok("nvmlDeviceGetPciInfo_v3", f.DeviceGetPciInfo(d, &pci), [&] {
          return std::string(std::string(pci.busId) + " device " + Hex(pci.pciDeviceId, 8) +
                             " subsystem " + Hex(pci.pciSubSystemId, 8));
        })) {
      g.bus_id = pci.busId;
      e << "    pciBusId: " << Quote(pci.busId) << "\n";
      e << "    pciDeviceId: " << Hex(pci.pciDeviceId, 8) << "\n";
      e << "    pciSubsystemId: " << Hex(pci.pciSubSystemId, 8) << "\n";
      const std::string dev = sysfs_root + "/bus/pci/devices/" + SysfsBdf(pci.busId);
      const std::string numa = ReadLine(dev + "/numa_node");
      c.raw << "#   sysfs numa_node: " << (numa.empty() ? "(none)" : numa) << "\n";
      if (!numa.empty() && numa != "-1") e << "    numaNode: " << numa << "\n";
      const std::string cls = ReadLine(dev + "/class");
      c.raw << "#   sysfs class: " << (cls.empty() ? "(none)" : cls) << "\n";
      if (!cls.empty()) e << "    pciClass: " << cls << "\n";
    }
    int major = 0, minor_cc = 0;
    if (c.Ok("nvmlDeviceGetCudaComputeCapability",
             f.DeviceGetCudaComputeCapability(d, &major, &minor_cc),
             [&] { return std::string(std::to_string(major) + "." + std::to_string(minor_cc)); })) {
      e << "    computeCapability: \"" << major << "." << minor_cc << "\"\n";
    }
    if (f.DeviceGetArchitecture) {
      nvmlDeviceArchitecture_t arch = 0;
      if (c.Ok("nvmlDeviceGetArchitecture", f.DeviceGetArchitecture(d, &arch),
               [&] { return std::string(std::to_string(arch)); }) &&
          *gpu_agent::nvml::ArchitectureName(arch) != '\0') {
        e << "    architecture: " << gpu_agent::nvml::ArchitectureName(arch) << "\n";
      }
    } else {
      c.Missing("nvmlDeviceGetArchitecture");
    }
    if (f.DeviceGetBrand) {
      nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
      if (c.Ok("nvmlDeviceGetBrand", f.DeviceGetBrand(d, &brand),
               [&] { return std::string(std::to_string(brand)); })) {
        e << "    brand: " << brand << "\n";
      }
    } else {
      c.Missing("nvmlDeviceGetBrand");
    }
    bool mig = false;
    if (f.DeviceGetMigMode) {
      unsigned current = 0, pending = 0;
      if (c.Ok("nvmlDeviceGetMigMode", f.DeviceGetMigMode(d, &current, &pending), [&] {
            return std::string("current " + std::to_string(current) + " pending " +
                               std::to_string(pending));
          })) {
        mig = current == NVML_DEVICE_MIG_ENABLE;
        e << "    migEnabled: " << (mig ? "true" : "false") << "\n";
      }
    } else {
      c.Missing("nvmlDeviceGetMigMode");
    }
    unsigned max_mig = 0;
    if (f.DeviceGetMaxMigDeviceCount &&
        c.Ok("nvmlDeviceGetMaxMigDeviceCount", f.DeviceGetMaxMigDeviceCount(d, &max_mig),
             [&] { return std::string(std::to_string(max_mig)); })) {
      e << "    maxMigDevices: " << max_mig << "\n";
    }
    if (mig && f.DeviceGetMigDeviceHandleByIndex) {
      std::ostringstream m;
      for (unsigned k = 0; k < max_mig; ++k) {
        nvmlDevice_t md = nullptr;
        const std::string fn = "nvmlDeviceGetMigDeviceHandleByIndex";
        nvmlReturn_t r = f.DeviceGetMigDeviceHandleByIndex(d, k, &md);
        if (r == NVML_ERROR_NOT_FOUND) continue;  // an empty slot
        if (!c.Ok(fn.c_str(), r, [&] { return std::string(std::to_string(k)); })) continue;
        unsigned gi = 0, ci = 0;
        nvmlDeviceAttributes_t at{};
        std::string muuid = "MIG-unknown";
        if (f.DeviceGetUUID(md, buf, sizeof(buf)) == NVML_SUCCESS) muuid = buf;
        m << "      - uuid: " << muuid << "\n";
        if (f.DeviceGetGpuInstanceId && f.DeviceGetGpuInstanceId(md, &gi) == NVML_SUCCESS) {
          m << "        gpuInstanceId: " << gi << "\n";
        }
        if (f.DeviceGetComputeInstanceId && f.DeviceGetComputeInstanceId(md, &ci) == NVML_SUCCESS) {
          m << "        computeInstanceId: " << ci << "\n";
        }
        if (f.DeviceGetAttributes &&
            c.Ok("nvmlDeviceGetAttributes_v2", f.DeviceGetAttributes(md, &at), [&] {
              return std::string(muuid + " " + std::to_string(at.memorySizeMB) + " MiB");
            })) {
          m << "        memoryMiB: " << at.memorySizeMB << "\n"
            << "        gpuInstanceSlices: " << at.gpuInstanceSliceCount << "\n"
            << "        computeInstanceSlices: " << at.computeInstanceSliceCount << "\n"
            << "        multiprocessors: " << at.multiprocessorCount << "\n"
            << "        decoders: " << at.sharedDecoderCount << "\n"
            << "        encoders: " << at.sharedEncoderCount << "\n"
            << "        jpegs: " << at.sharedJpegCount << "\n"
            << "        ofas: " << at.sharedOfaCount << "\n";
        }
      }
      if (!m.str().empty()) e << "    migDevices:\n" << m.str();
    }
    if (mig && (f.DeviceGetGpuInstanceProfileInfoV || f.DeviceGetGpuInstanceProfileInfo)) {
      std::ostringstream p;
      for (unsigned prof = 0; prof <= 16; ++prof) {
        nvmlGpuInstanceProfileInfo_v2_t v{};
        v.version = nvmlGpuInstanceProfileInfo_v2;
        nvmlReturn_t r = f.DeviceGetGpuInstanceProfileInfoV
                             ? f.DeviceGetGpuInstanceProfileInfoV(d, prof, &v)
                             : NVML_ERROR_FUNCTION_NOT_FOUND;
        if (r != NVML_SUCCESS) continue;  // profiles this GPU has not
        p << "      - profile: " << prof << "\n"
          << "        id: " << v.id << "\n"
          << "        name: " << Quote(v.name) << "\n"
          << "        slices: " << v.sliceCount << "\n"
          << "        instances: " << v.instanceCount << "\n"
          << "        memoryMiB: " << v.memorySizeMB << "\n"
          << "        multiprocessors: " << v.multiprocessorCount << "\n"
          << "        decoders: " << v.decoderCount << "\n"
          << "        encoders: " << v.encoderCount << "\n"
          << "        jpegs: " << v.jpegCount << "\n"
          << "        ofas: " << v.ofaCount << "\n";
        c.raw << "#   nvmlDeviceGetGpuInstanceProfileInfoV(" << prof << "): " << v.name << "\n";
      }
      if (!p.str().empty()) e << "    migProfiles:\n" << p.str();
    }
    if (f.DeviceGetGpuFabricInfoV) {
      nvmlGpuFabricInfo_v2_t fi{};
      fi.version = nvmlGpuFabricInfo_v2;
      static const char* kState[] = {"not-supported", "not-started", "in-progress", "completed"};
      if (c.Ok("nvmlDeviceGetGpuFabricInfoV", f.DeviceGetGpuFabricInfoV(d, &fi),
               [&] {
                 return std::string("state " + std::to_string(fi.state) + " clique " +
                                    std::to_string(fi.cliqueId));
               }) &&
          fi.state <= 3) {
        e << "    fabric:\n"
          << "      clusterUuid: " << UuidText(fi.clusterUuid) << "\n"
          << "      cliqueId: " << fi.cliqueId << "\n"
          << "      state: " << kState[fi.state] << "\n"
          << "      status: " << fi.status << "\n";
      }
    } else {
      c.Missing("nvmlDeviceGetGpuFabricInfoV");
    }
    if (f.DeviceGetFieldValues) {
      nvmlFieldValue_t v[2] = {};
      v[0].fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
      v[1].fieldId = NVML_FI_DEV_NVLINK_GET_STATE;  // link 0
      if (c.Ok("nvmlDeviceGetFieldValues", f.DeviceGetFieldValues(d, 2, v),
               [&] { return std::string("called"); })) {
        for (const nvmlFieldValue_t& fv : v) {
          c.raw << "#   field " << fv.fieldId << ": "
                << (fv.nvmlReturn == NVML_SUCCESS ? std::to_string(fv.value.uiVal)
                                                  : lib.ErrorText(fv.nvmlReturn))
                << "\n";
        }
        if (v[0].nvmlReturn == NVML_SUCCESS) {
          e << "    recoveryAction: " << v[0].value.uiVal << "\n";
        }
        e << "    nvlinkStateField: " << (v[1].nvmlReturn == NVML_SUCCESS ? "true" : "false")
          << "\n";
      }
    }
    // The health checks' queries (gpu-agent health), as the fixture names them.
    if (f.DeviceGetRemappedRows) {
      unsigned corr = 0, unc = 0, pending = 0, failed = 0;
      const nvmlReturn_t r = f.DeviceGetRemappedRows(d, &corr, &unc, &pending, &failed);
      if (c.Ok("nvmlDeviceGetRemappedRows", r, [&] {
            return std::string("correctable " + std::to_string(corr) + " uncorrectable " +
                               std::to_string(unc) + " pending " + std::to_string(pending) +
                               " failed " + std::to_string(failed));
          })) {
        e << "    remapPending: " << (pending ? "true" : "false") << "\n"
          << "    remapFailed: " << (failed ? "true" : "false") << "\n";
      } else if (r == NVML_ERROR_NOT_SUPPORTED) {
        e << "    rowRemapping: false\n";
      }
    }
    if (f.DeviceGetRetiredPagesPendingStatus) {
      nvmlEnableState_t st = NVML_FEATURE_DISABLED;
      if (c.Ok("nvmlDeviceGetRetiredPagesPendingStatus",
               f.DeviceGetRetiredPagesPendingStatus(d, &st), [&] { return std::to_string(st); })) {
        e << "    pagesPending: " << (st == NVML_FEATURE_ENABLED ? "true" : "false") << "\n";
      }
    }
    if (f.DeviceGetEccMode) {
      nvmlEnableState_t cur = NVML_FEATURE_DISABLED, pend = NVML_FEATURE_DISABLED;
      if (c.Ok("nvmlDeviceGetEccMode", f.DeviceGetEccMode(d, &cur, &pend), [&] {
            return "current " + std::to_string(cur) + " pending " + std::to_string(pend);
          })) {
        e << "    ecc: " << (cur == NVML_FEATURE_ENABLED ? "true" : "false") << "\n";
      }
    }
    if (f.DeviceGetTotalEccErrors) {
      unsigned long long n = 0;
      if (c.Ok("nvmlDeviceGetTotalEccErrors",
               f.DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                         &n),
               [&] { return "uncorrected volatile " + std::to_string(n); })) {
        e << "    eccUncorrected: " << n << "\n";
      }
    }
    if (f.DeviceGetTemperature) {
      unsigned t = 0;
      if (c.Ok("nvmlDeviceGetTemperature", f.DeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t),
               [&] { return std::to_string(t) + " C"; })) {
        e << "    temperature: " << t << "\n";
      }
    }
    if (f.DeviceGetTemperatureThreshold) {
      for (const auto& [kind, key] :
           {std::pair{NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, "slowdownTemperature"},
            std::pair{NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, "shutdownTemperature"}}) {
        unsigned t = 0;
        if (c.Ok("nvmlDeviceGetTemperatureThreshold", f.DeviceGetTemperatureThreshold(d, kind, &t),
                 [&, key = key] { return std::string(key) + " " + std::to_string(t) + " C"; })) {
          e << "    " << key << ": " << t << "\n";
        }
      }
    }
    if (f.DeviceGetCurrentClocksEventReasons) {
      unsigned long long reasons = 0;
      if (c.Ok("nvmlDeviceGetCurrentClocksEventReasons",
               f.DeviceGetCurrentClocksEventReasons(d, &reasons),
               [&] { return Hex(static_cast<unsigned>(reasons), 4); })) {
        e << "    clockEventReasons: " << Hex(static_cast<unsigned>(reasons), 1) << "\n";
      }
    }
    for (const auto& [fn, call, key] :
         {std::tuple{"nvmlDeviceGetCurrPcieLinkWidth", f.DeviceGetCurrPcieLinkWidth, "pcieWidth"},
          std::tuple{"nvmlDeviceGetMaxPcieLinkWidth", f.DeviceGetMaxPcieLinkWidth, "pcieMaxWidth"},
          std::tuple{"nvmlDeviceGetCurrPcieLinkGeneration", f.DeviceGetCurrPcieLinkGeneration,
                     "pcieGeneration"},
          std::tuple{"nvmlDeviceGetMaxPcieLinkGeneration", f.DeviceGetMaxPcieLinkGeneration,
                     "pcieMaxGeneration"},
          std::tuple{"nvmlDeviceGetPcieReplayCounter", f.DeviceGetPcieReplayCounter,
                     "pcieReplays"}}) {
      if (call == nullptr) continue;
      unsigned value = 0;
      if (c.Ok(fn, call(d, &value), [&] { return std::to_string(value); })) {
        e << "    " << key << ": " << value << "\n";
      }
    }
    if (f.DeviceGetSupportedEventTypes) {
      unsigned long long types = 0;
      c.Ok("nvmlDeviceGetSupportedEventTypes", f.DeviceGetSupportedEventTypes(d, &types),
           [&] { return std::string(Hex(static_cast<unsigned>(types), 8)); });
    }
    if (!c.fail.empty()) {
      e << "    fail:\n";
      for (const auto& [fn, code] : c.fail) e << "      " << fn << ": " << code << "\n";
    }
    g.yaml = e.str();
    g.raw = c.raw.str();
  }

  // Topology: GPUs a PCIe switch apart share a pcieSwitch, a host bridge
  // apart a hostBridge (the stand-in derives NODE and SYSTEM from numaNode).
  std::vector<int> sw(count), hb(count);
  std::iota(sw.begin(), sw.end(), 0);
  std::iota(hb.begin(), hb.end(), 0);
  std::ostringstream topo_raw;
  if (f.DeviceGetTopologyCommonAncestor) {
    for (unsigned a = 0; a < count; ++a) {
      for (unsigned b = a + 1; b < count; ++b) {
        nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
        nvmlReturn_t r = f.DeviceGetTopologyCommonAncestor(gpus[a].handle, gpus[b].handle, &level);
        topo_raw << "#   " << a << "-" << b << ": "
                 << (r == NVML_SUCCESS ? std::to_string(level) : lib.ErrorText(r)) << "\n";
        if (r != NVML_SUCCESS) continue;
        if (level <= NVML_TOPOLOGY_MULTIPLE) sw[b] = sw[a];
        if (level <= NVML_TOPOLOGY_HOSTBRIDGE) hb[b] = hb[a];
      }
    }
  }
  // NVLink: links whose far end is another GPU of this node.
  std::map<std::pair<unsigned, unsigned>, unsigned> links;
  std::ostringstream link_raw;
  if (f.DeviceGetNvLinkState && f.DeviceGetNvLinkRemotePciInfo) {
    for (unsigned a = 0; a < count; ++a) {
      unsigned up = 0, to_other = 0;
      for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; ++l) {
        nvmlEnableState_t st = NVML_FEATURE_DISABLED;
        if (f.DeviceGetNvLinkState(gpus[a].handle, l, &st) != NVML_SUCCESS ||
            st != NVML_FEATURE_ENABLED) {
          continue;
        }
        ++up;
        nvmlPciInfo_t remote{};
        if (f.DeviceGetNvLinkRemotePciInfo(gpus[a].handle, l, &remote) != NVML_SUCCESS) continue;
        for (unsigned b = a + 1; b < count; ++b) {
          if (strcasecmp(remote.busId, gpus[b].bus_id.c_str()) == 0) ++links[{a, b}];
        }
        ++to_other;
      }
      link_raw << "#   GPU " << a << ": " << up << " links up\n";
    }
  }
  const bool multi = count > 1;
  y << "gpus:\n";
  for (unsigned i = 0; i < count; ++i) {
    y << "# GPU " << i << ", every answer:\n" << gpus[i].raw << gpus[i].yaml;
    if (multi) y << "    pcieSwitch: " << sw[i] << "\n    hostBridge: " << hb[i] << "\n";
  }
  if (!topo_raw.str().empty()) y << "# nvmlDeviceGetTopologyCommonAncestor:\n" << topo_raw.str();
  if (!link_raw.str().empty()) y << "# nvmlDeviceGetNvLinkState:\n" << link_raw.str();
  if (!links.empty()) {
    y << "nvlinks:\n";
    for (const auto& [pair, n] : links) {
      y << "  - gpus: [" << pair.first << ", " << pair.second << "]\n    links: " << n << "\n";
    }
  }
  std::ofstream out(out_path);
  out << y.str();
  if (!out.good()) {
    std::fprintf(stderr, "nvml-capture: cannot write %s\n", out_path.c_str());
    return 1;
  }
  std::printf("nvml-capture: %u GPU(s), driver %s, written to %s\n", count, driver.c_str(),
              out_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
