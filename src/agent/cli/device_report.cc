#include "agent/cli/device_report.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>

#include "base/strings.h"
#include "nvml/mig_profile.h"

namespace gpu_agent {
namespace {

std::string LinkLabel(const nvml::GpuLink& link) {
  if (link.nvlinks > 0) return StrCat("NV", link.nvlinks);
  switch (link.pcie_level) {
    case 10:
      return "PIX";
    case 20:
      return "PXB";
    case 30:
      return "PHB";
    case 40:
      return "NODE";
    case 50:
      return "SYS";
    default:
      return "?";
  }
}

// The link between the i-th and j-th GPUs listed; null when the matrix has
// none (links are by position in the list: a selection keeps the GPUs'
// own indexes, which need not be their positions).
const nvml::GpuLink* LinkBetween(const nvml::Inventory& inv, size_t i, size_t j) {
  if (i >= inv.links.size() || j >= inv.links[i].size()) return nullptr;
  return &inv.links[i][j];
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

std::string DevicesAsTable(const nvml::Inventory& inv) {
  std::string out =
      StrCat("Driver ", inv.driver_version.empty() ? "?" : inv.driver_version, ", CUDA ",
             inv.cuda_driver_version.empty() ? "?" : inv.cuda_driver_version, ", ", inv.gpus.size(),
             " GPU(s)\n");
  if (inv.gpus.empty()) return out;
  std::vector<std::vector<std::string>> rows = {
      {"INDEX", "UUID", "NAME", "MEMORY", "MINOR", "PCI BUS ID", "NUMA", "CC", "MIG"}};
  for (const nvml::GpuRecord& g : inv.gpus) {
    rows.push_back({StrCat(g.index), g.uuid.empty() ? "?" : g.uuid, g.name.empty() ? "?" : g.name,
                    StrCat(g.memory_mib, " MiB"), g.minor < 0 ? "?" : StrCat(g.minor), g.pci_bus_id,
                    g.numa_node < 0 ? "-" : StrCat(g.numa_node),
                    StrCat(g.cc_major, ".", g.cc_minor),
                    g.mig_enabled              ? StrCat("on (", g.mig_devices.size(), ")")
                    : g.mig_mode_error.empty() ? "off"
                                               : "unknown"});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    StrAppend(&out, line, "\n");
  }
  for (const nvml::GpuRecord& g : inv.gpus) {
    for (const nvml::MigRecord& m : g.mig_devices) {
      const std::string profile = nvml::MigProfileName(g, m);
      StrAppend(&out, "  GPU ", g.index, " MIG ", m.index, ": ", m.uuid, " (",
                profile.empty() ? "no profile name" : profile, ", ", m.memory_mib, " MiB, GI ",
                m.gpu_instance_id, " CI ", m.compute_instance_id, ")\n");
    }
    if (!g.error.empty()) StrAppend(&out, "  GPU ", g.index, " error: ", g.error, "\n");
  }
  if (inv.gpus.size() > 1) {
    StrAppend(&out,
              "\nInterconnect (NV<n>: NVLinks, PIX/PXB: PCIe switch, PHB: host "
              "bridge, NODE: same NUMA node, SYS: across sockets)\n      ");
    for (const nvml::GpuRecord& g : inv.gpus) StrAppend(&out, "GPU", g.index, "\t");
    StrAppend(&out, "\n");
    for (size_t i = 0; i < inv.gpus.size(); ++i) {
      StrAppend(&out, "GPU", inv.gpus[i].index, "  ");
      for (size_t j = 0; j < inv.gpus.size(); ++j) {
        const nvml::GpuLink* link = LinkBetween(inv, i, j);
        StrAppend(&out, i == j ? "X" : link ? LinkLabel(*link) : "?", "\t");
      }
      StrAppend(&out, "\n");
    }
  }
  return out;
}

std::string DevicesAsJson(const nvml::Inventory& inv) {
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.SetIndent(' ', 2);
  w.StartArray();
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    const nvml::GpuRecord& g = inv.gpus[i];
    w.StartObject();
    w.Key("index");
    w.Uint(g.index);
    w.Key("uuid");
    w.String(g.uuid.c_str());
    w.Key("name");
    w.String(g.name.c_str());
    w.Key("memoryMiB");
    w.Uint64(g.memory_mib);
    w.Key("minor");
    w.Int(g.minor);
    w.Key("pciBusId");
    w.String(g.pci_bus_id.c_str());
    w.Key("pciDeviceId");
    w.String(Hex(g.pci_device_id).c_str());
    w.Key("numaNode");
    w.Int(g.numa_node);
    w.Key("computeCapability");
    w.String(StrCat(g.cc_major, ".", g.cc_minor).c_str());
    w.Key("architecture");
    w.String(g.architecture.c_str());
    w.Key("driverVersion");
    w.String(inv.driver_version.c_str());
    w.Key("cudaDriverVersion");
    w.String(inv.cuda_driver_version.c_str());
    w.Key("migEnabled");
    w.Bool(g.mig_enabled);
    w.Key("migDevices");
    w.StartArray();
    for (const nvml::MigRecord& m : g.mig_devices) {
      w.StartObject();
      w.Key("index");
      w.Uint(m.index);
      w.Key("uuid");
      w.String(m.uuid.c_str());
      w.Key("gpuInstanceId");
      w.Uint(m.gpu_instance_id);
      w.Key("computeInstanceId");
      w.Uint(m.compute_instance_id);
      w.Key("memoryMiB");
      w.Uint64(m.memory_mib);
      w.Key("gpuInstanceSlices");
      w.Uint(m.gpu_instance_slices);
      w.Key("profile");
      w.String(nvml::MigProfileName(g, m).c_str());
      w.EndObject();
    }
    w.EndArray();
    w.Key("links");
    w.StartObject();
    for (size_t j = 0; j < inv.gpus.size(); ++j) {
      const nvml::GpuLink* link = LinkBetween(inv, i, j);
      if (j == i || link == nullptr) continue;
      w.Key(StrCat(inv.gpus[j].index).c_str());
      w.String(LinkLabel(*link).c_str());
    }
    w.EndObject();
    if (!g.error.empty()) {
      w.Key("error");
      w.String(g.error.c_str());
    }
    w.EndObject();
  }
  w.EndArray();
  return std::string(buf.GetString(), buf.GetSize()) + "\n";
}

std::string DevicesAsYaml(const nvml::Inventory& inv) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "driverVersion" << YAML::Value << inv.driver_version
    << YAML::Key << "cudaDriverVersion" << YAML::Value << inv.cuda_driver_version << YAML::Key
    << "gpus" << YAML::Value << YAML::BeginSeq;
  for (const nvml::GpuRecord& g : inv.gpus) {
    e << YAML::BeginMap << YAML::Key << "index" << YAML::Value << g.index << YAML::Key << "uuid"
      << YAML::Value << g.uuid << YAML::Key << "name" << YAML::Value << g.name << YAML::Key
      << "memoryMiB" << YAML::Value << g.memory_mib << YAML::Key << "minor" << YAML::Value
      << g.minor << YAML::Key << "pciBusId" << YAML::Value << g.pci_bus_id << YAML::Key
      << "numaNode" << YAML::Value << g.numa_node << YAML::Key << "computeCapability" << YAML::Value
      << StrCat(g.cc_major, ".", g.cc_minor) << YAML::Key << "migEnabled" << YAML::Value
      << g.mig_enabled;
    if (!g.mig_devices.empty()) {
      e << YAML::Key << "migDevices" << YAML::Value << YAML::BeginSeq;
      for (const nvml::MigRecord& m : g.mig_devices) {
        e << YAML::BeginMap << YAML::Key << "uuid" << YAML::Value << m.uuid << YAML::Key
          << "memoryMiB" << YAML::Value << m.memory_mib << YAML::Key << "gpuInstanceId"
          << YAML::Value << m.gpu_instance_id << YAML::Key << "profile" << YAML::Value
          << nvml::MigProfileName(g, m) << YAML::EndMap;
      }
      e << YAML::EndSeq;
    }
    if (!g.error.empty()) e << YAML::Key << "error" << YAML::Value << g.error;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace gpu_agent
