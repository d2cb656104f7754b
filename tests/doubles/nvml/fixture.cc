#include "fixture.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <sstream>

#include "nvml/nvml_api.h"

namespace fake_nvml {
namespace {

struct FixtureError {
  YAML::Mark mark;
  std::string message;
};

[[noreturn]] void Fail(const YAML::Node& node, const std::string& message) {
  throw FixtureError{node.Mark(), message};
}

template <typename T>
T Get(const YAML::Node& map, const char* key, T fallback) {
  YAML::Node n = map[key];
  if (!n) return fallback;
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    Fail(n, std::string("\"") + key + "\" has the wrong type");
  }
}

void CheckKeys(const YAML::Node& map, const std::set<std::string>& known, const char* where) {
  if (!map.IsMap()) Fail(map, std::string(where) + " must be a mapping");
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (!known.count(key)) Fail(kv.first, "unknown key \"" + key + "\" in " + where);
  }
}

bool ValidBusId(const std::string& s) {
  // 8 hex digits ':' 2 ':' 2 '.' 1
  if (s.size() != 16 || s[8] != ':' || s[11] != ':' || s[14] != '.') return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 11 || i == 14) continue;
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

unsigned ArchFromName(const YAML::Node& n) {
  static const std::map<std::string, unsigned> kArch = {
      {"kepler", 2}, {"maxwell", 3}, {"pascal", 4}, {"volta", 5},     {"turing", 6},
      {"ampere", 7}, {"ada", 8},     {"hopper", 9}, {"blackwell", 10}};
  auto it = kArch.find(n.as<std::string>());
  if (it == kArch.end()) Fail(n, "unknown architecture \"" + n.as<std::string>() + "\"");
  return it->second;
}

// "8-4-4-4-12" hex digits into 16 bytes.
bool ParseUuid(const std::string& text, unsigned char (&out)[16]) {
  if (text.size() != 36) return false;
  size_t byte = 0;
  for (size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i++] != '-') return false;
      continue;
    }
    if (!std::isxdigit(static_cast<unsigned char>(text[i])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 1]))) {
      return false;
    }
    out[byte++] = static_cast<unsigned char>(std::stoul(text.substr(i, 2), nullptr, 16));
    i += 2;
  }
  return byte == 16;
}

void ParseFabric(const YAML::Node& f, GpuFixture* gpu) {
  CheckKeys(f, {"clusterUuid", "cliqueId", "state", "status"}, "a GPU's fabric");
  static const std::map<std::string, unsigned> kStates = {
      {"not-supported", 0}, {"not-started", 1}, {"in-progress", 2}, {"completed", 3}};
  gpu->has_fabric = true;
  const std::string uuid = Get<std::string>(f, "clusterUuid", "");
  if (!ParseUuid(uuid, gpu->fabric.cluster_uuid)) {
    Fail(f["clusterUuid"] ? f["clusterUuid"] : f,
         "fabric.clusterUuid must be a UUID (8-4-4-4-12 hex digits), got \"" + uuid + "\"");
  }
  gpu->fabric.clique_id = Get<unsigned>(f, "cliqueId", 0);
  const std::string state = Get<std::string>(f, "state", "completed");
  auto it = kStates.find(state);
  if (it == kStates.end()) {
    Fail(f["state"],
         "fabric.state is one of not-supported, not-started, in-progress, completed; got \"" +
             state + "\"");
  }
  gpu->fabric.state = it->second;
  gpu->fabric.status = Get<int>(f, "status", 0);
}

GpuFixture ParseGpu(const YAML::Node& g, size_t index) {
  CheckKeys(g,
            {"uuid",
             "name",
             "memoryMiB",
             "minor",
             "pciBusId",
             "pciDeviceId",
             "pciSubsystemId",
             "numaNode",
             "pcieSwitch",
             "hostBridge",
             "computeCapability",
             "architecture",
             "brand",
             "migEnabled",
             "maxMigDevices",
             "migDevices",
             "migProfiles",
             "lost",
             "fail",
             "resetPending",
             "pciClass",
             "fabric",
             "rowRemapping",
             "ecc",
             "eccUncorrected",
             "temperature",
             "slowdownTemperature",
             "shutdownTemperature",
             "clockEventReasons",
             "pcieWidth",
             "pcieMaxWidth",
             "pcieGeneration",
             "pcieMaxGeneration",
             "pcieReplays",
             "nvlinkStateField",
             "nvlinksDown",
             "recoveryAction",
             "remapPending",
             "remapFailed",
             "pagesPending"},
            "a GPU");
  GpuFixture gpu;
  gpu.uuid = Get<std::string>(g, "uuid", "");
  if (gpu.uuid.rfind("GPU-", 0) != 0)
    Fail(g, "GPU " + std::to_string(index) + " needs a uuid starting with GPU-");
  gpu.name = Get<std::string>(g, "name", "NVIDIA Test GPU");
  gpu.memory_mib = Get<uint64_t>(g, "memoryMiB", 16384);
  gpu.minor = Get<unsigned>(g, "minor", static_cast<unsigned>(index));
  gpu.pci_bus_id = Get<std::string>(g, "pciBusId", "");
  if (!ValidBusId(gpu.pci_bus_id)) {
    Fail(g["pciBusId"] ? g["pciBusId"] : g,
         "pciBusId must look like 00000000:BB:DD.F, got \"" + gpu.pci_bus_id + "\"");
  }
  gpu.pci_device_id = Get<uint32_t>(g, "pciDeviceId", 0x20b010de);
  gpu.pci_subsystem_id = Get<uint32_t>(g, "pciSubsystemId", 0x134f10de);
  gpu.numa_node = Get<int>(g, "numaNode", -1);
  gpu.pci_class = Get<uint32_t>(g, "pciClass", gpu.pci_class);
  if (gpu.pci_class > 0xFFFFFF) Fail(g["pciClass"], "pciClass is a 24-bit PCI class code");
  if (YAML::Node fabric = g["fabric"]) ParseFabric(fabric, &gpu);
  gpu.pcie_switch = Get<int>(g, "pcieSwitch", -1);
  gpu.host_bridge = Get<int>(g, "hostBridge", -1);
  const std::string cc = Get<std::string>(g, "computeCapability", "8.0");
  if (std::sscanf(cc.c_str(), "%d.%d", &gpu.cc_major, &gpu.cc_minor) != 2) {
    Fail(g["computeCapability"], "computeCapability must look like 8.0");
  }
  if (g["architecture"]) gpu.architecture = ArchFromName(g["architecture"]);
  gpu.brand = Get<int>(g, "brand", 2);
  gpu.mig_enabled = Get<bool>(g, "migEnabled", false);
  gpu.max_mig_devices = Get<unsigned>(g, "maxMigDevices", 7);
  gpu.lost = Get<bool>(g, "lost", false);
  // The driver asks for a reset (recovery action GPU_RESET), as after an
  // XID before this process started.
  if (Get<bool>(g, "resetPending", false)) gpu.recovery_action = 1;
  for (const std::string& field : GpuFieldNames()) {
    YAML::Node n = g[field];
    if (!n) continue;
    std::string text;
    if (n.IsSequence()) {
      for (const YAML::Node& item : n) {
        if (!item.IsScalar()) Fail(item, field + " takes a list of link numbers");
        text += (text.empty() ? "" : ",") + item.Scalar();
      }
    } else if (n.IsScalar()) {
      text = n.Scalar();
    } else {
      Fail(n, field + " must be a value");
    }
    std::string error;
    if (!SetGpuField(&gpu, field, text, &error)) Fail(n, error);
  }
  if (YAML::Node migs = g["migDevices"]) {
    if (!migs.IsSequence()) Fail(migs, "migDevices must be a list");
    for (const YAML::Node& m : migs) {
      CheckKeys(
          m,
          {"uuid", "gpuInstanceId", "computeInstanceId", "memoryMiB", "gpuInstanceSlices",
           "computeInstanceSlices", "multiprocessors", "decoders", "encoders", "jpegs", "ofas"},
          "a MIG device");
      MigFixture mig;
      mig.uuid = Get<std::string>(m, "uuid", "");
      if (mig.uuid.rfind("MIG-", 0) != 0) Fail(m, "a MIG device needs a uuid starting with MIG-");
      mig.gpu_instance_id = Get<unsigned>(m, "gpuInstanceId", 0);
      mig.compute_instance_id = Get<unsigned>(m, "computeInstanceId", 0);
      mig.memory_mib = Get<uint64_t>(m, "memoryMiB", 0);
      mig.gpu_instance_slices = Get<unsigned>(m, "gpuInstanceSlices", 1);
      mig.compute_instance_slices = Get<unsigned>(m, "computeInstanceSlices", 1);
      mig.multiprocessors = Get<unsigned>(m, "multiprocessors", 14);
      mig.decoders = Get<unsigned>(m, "decoders", 0);
      mig.encoders = Get<unsigned>(m, "encoders", 0);
      mig.jpegs = Get<unsigned>(m, "jpegs", 0);
      mig.ofas = Get<unsigned>(m, "ofas", 0);
      gpu.mig_devices.push_back(mig);
    }
    if (gpu.mig_devices.size() > gpu.max_mig_devices) {
      Fail(migs, "more migDevices than maxMigDevices");
    }
    if (!gpu.mig_devices.empty() && !gpu.mig_enabled) {
      Fail(migs, "migDevices given but migEnabled is false");
    }
  }
  if (YAML::Node profiles = g["migProfiles"]) {
    if (!profiles.IsSequence()) Fail(profiles, "migProfiles must be a list");
    std::set<unsigned> seen;
    for (const YAML::Node& p : profiles) {
      CheckKeys(p,
                {"profile", "id", "name", "slices", "instances", "multiprocessors", "memoryMiB",
                 "decoders", "encoders", "jpegs", "ofas"},
                "a MIG profile");
      ProfileFixture pf;
      if (!p["profile"] || !p["id"] || !p["memoryMiB"]) {
        Fail(p,
             "a MIG profile needs profile (its NVML_GPU_INSTANCE_PROFILE_* index), id and "
             "memoryMiB");
      }
      pf.profile = Get<unsigned>(p, "profile", 0);
      if (pf.profile > 16) Fail(p["profile"], "profile is an index from 0 to 16");
      if (!seen.insert(pf.profile).second) Fail(p["profile"], "duplicate profile index");
      pf.id = Get<unsigned>(p, "id", 0);
      pf.name = Get<std::string>(p, "name", "");
      pf.slices = Get<unsigned>(p, "slices", 1);
      pf.instances = Get<unsigned>(p, "instances", 1);
      pf.multiprocessors = Get<unsigned>(p, "multiprocessors", 0);
      pf.memory_mib = Get<uint64_t>(p, "memoryMiB", 0);
      pf.decoders = Get<unsigned>(p, "decoders", 0);
      pf.encoders = Get<unsigned>(p, "encoders", 0);
      pf.jpegs = Get<unsigned>(p, "jpegs", 0);
      pf.ofas = Get<unsigned>(p, "ofas", 0);
      gpu.mig_profiles.push_back(pf);
    }
  }
  if (YAML::Node fails = g["fail"]) {
    if (!fails.IsMap()) Fail(fails, "fail must map NVML function names to return codes");
    for (const auto& kv : fails) {
      const std::string fn = kv.first.as<std::string>();
      if (fn.rfind("nvml", 0) != 0) Fail(kv.first, "fail keys are NVML function names (nvml...)");
      gpu.failures[fn] = Get<int>(fails, fn.c_str(), 999);
    }
  }
  return gpu;
}

}  // namespace

const std::vector<std::string>& GpuFieldNames() {
  static const std::vector<std::string> kNames = {"rowRemapping",        "ecc",
                                                  "eccUncorrected",      "temperature",
                                                  "slowdownTemperature", "shutdownTemperature",
                                                  "clockEventReasons",   "pcieWidth",
                                                  "pcieMaxWidth",        "pcieGeneration",
                                                  "pcieMaxGeneration",   "pcieReplays",
                                                  "nvlinkStateField",    "nvlinksDown",
                                                  "recoveryAction",      "remapPending",
                                                  "remapFailed",         "pagesPending"};
  return kNames;
}

bool SetGpuField(GpuFixture* gpu, const std::string& name, const std::string& value,
                 std::string* error) {
  auto number = [&](uint64_t* out) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 0);
    if (value.empty() || value[0] == '-' || errno != 0 || *end != '\0') {
      *error = name + " takes a whole number (0x... for hex), got \"" + value + "\"";
      return false;
    }
    *out = v;
    return true;
  };
  auto small = [&](unsigned* out) {
    uint64_t v = 0;
    if (!number(&v)) return false;
    if (v > 0xFFFFFFFFull) {
      *error = name + " is out of range: " + value;
      return false;
    }
    *out = static_cast<unsigned>(v);
    return true;
  };
  auto flag = [&](bool* out) {
    if (value == "true" || value == "1") {
      *out = true;
    } else if (value == "false" || value == "0") {
      *out = false;
    } else {
      *error = name + " takes true or false, got \"" + value + "\"";
      return false;
    }
    return true;
  };
  HealthFixture& h = gpu->health;
  if (name == "rowRemapping") return flag(&h.row_remapping);
  if (name == "ecc") return flag(&h.ecc);
  if (name == "eccUncorrected") return number(&h.ecc_uncorrected);
  if (name == "temperature") return small(&h.temperature);
  if (name == "slowdownTemperature") return small(&h.slowdown_temperature);
  if (name == "shutdownTemperature") return small(&h.shutdown_temperature);
  if (name == "clockEventReasons") return number(&h.clock_event_reasons);
  if (name == "pcieWidth") return small(&h.pcie_width);
  if (name == "pcieMaxWidth") return small(&h.pcie_max_width);
  if (name == "pcieGeneration") return small(&h.pcie_generation);
  if (name == "pcieMaxGeneration") return small(&h.pcie_max_generation);
  if (name == "pcieReplays") return small(&h.pcie_replays);
  if (name == "nvlinkStateField") return flag(&h.nvlink_state_field);
  if (name == "recoveryAction") return small(&gpu->recovery_action);
  if (name == "remapPending") return flag(&gpu->remap_pending);
  if (name == "remapFailed") return flag(&gpu->remap_failed);
  if (name == "pagesPending") return flag(&gpu->pages_pending);
  if (name == "nvlinksDown") {
    std::vector<unsigned> links;
    std::stringstream in(value);
    std::string item;
    while (std::getline(in, item, ',')) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v >= 64) {
        *error = "nvlinksDown takes link numbers from 0 to 63, got \"" + item + "\"";
        return false;
      }
      links.push_back(static_cast<unsigned>(v));
    }
    h.nvlinks_down = std::move(links);
    return true;
  }
  *error = "unknown GPU field \"" + name + "\"";
  return false;
}

bool LoadFixture(const std::string& path, Fixture* out, std::string* error) {
  Fixture fx;
  try {
    YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) Fail(root, "the fixture must be a mapping with a gpus list");
    CheckKeys(root,
              {"driverVersion", "nvmlVersion", "cudaDriverVersion", "initError", "privileged",
               "gpus", "nvlinks", "nvlinkSlots", "productName"},
              "the fixture");
    fx.driver_version = Get<std::string>(root, "driverVersion", fx.driver_version);
    fx.nvml_version = Get<std::string>(root, "nvmlVersion", fx.nvml_version);
    fx.cuda_driver_version = Get<int>(root, "cudaDriverVersion", fx.cuda_driver_version);
    fx.init_error = Get<int>(root, "initError", 0);
    fx.privileged = Get<bool>(root, "privileged", true);
    fx.product_name = Get<std::string>(root, "productName", "");
    fx.nvlink_slots = Get<unsigned>(root, "nvlinkSlots", fx.nvlink_slots);
    if (fx.nvlink_slots == 0 || fx.nvlink_slots > 64) {
      Fail(root["nvlinkSlots"], "nvlinkSlots must be between 1 and 64");
    }
    YAML::Node gpus = root["gpus"];
    if (gpus && !gpus.IsSequence()) Fail(gpus, "gpus must be a list");
    std::set<std::string> uuids, buses;
    std::set<unsigned> minors;
    if (gpus) {
      for (size_t i = 0; i < gpus.size(); ++i) {
        GpuFixture gpu = ParseGpu(gpus[i], i);
        if (!uuids.insert(gpu.uuid).second) Fail(gpus[i], "duplicate uuid " + gpu.uuid);
        if (!buses.insert(gpu.pci_bus_id).second)
          Fail(gpus[i], "duplicate pciBusId " + gpu.pci_bus_id);
        if (!minors.insert(gpu.minor).second)
          Fail(gpus[i], "duplicate minor " + std::to_string(gpu.minor));
        fx.gpus.push_back(std::move(gpu));
      }
    }
    if (YAML::Node links = root["nvlinks"]) {
      if (!links.IsSequence()) Fail(links, "nvlinks must be a list");
      for (const YAML::Node& l : links) {
        CheckKeys(l, {"gpus", "links"}, "an nvlinks entry");
        YAML::Node pair = l["gpus"];
        if (!pair || !pair.IsSequence() || pair.size() != 2)
          Fail(l, "an nvlinks entry needs gpus: [a, b]");
        NvLinkFixture nl;
        nl.a = pair[0].as<unsigned>();
        nl.b = pair[1].as<unsigned>();
        nl.links = Get<unsigned>(l, "links", 1);
        if (nl.a >= fx.gpus.size() || nl.b >= fx.gpus.size() || nl.a == nl.b) {
          Fail(pair, "nvlinks gpus must be two different GPU indexes of this fixture");
        }
        fx.nvlinks.push_back(nl);
      }
    }
  } catch (const FixtureError& e) {
    std::ostringstream os;
    os << path << ":" << e.mark.line + 1 << ":" << e.mark.column + 1 << ": " << e.message;
    *error = os.str();
    return false;
  } catch (const YAML::BadFile&) {
    *error = path + ": cannot read the fixture file";
    return false;
  } catch (const YAML::Exception& e) {
    std::ostringstream os;
    os << path << ":" << e.mark.line + 1 << ":" << e.mark.column + 1 << ": " << e.msg;
    *error = os.str();
    return false;
  }
  *out = std::move(fx);
  return true;
}

const char* ErrorText(int r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_NOT_READY:
      return "System is not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
      return "Invalid state";
    default:
      return "Unknown Error";
  }
}

}  // namespace fake_nvml
