// Helper for tests and the demo: checks a fixture, writes the sysfs files
// the agent reads for it (NUMA nodes, PCI classes, the DMI product name),
// since NVML does not report them, or answers as nvidia-smi would on the
// fixture's node (scripts/gpu-check.sh --standin compares the agent with it).
//   fake-nvml-tool check FIXTURE
//   fake-nvml-tool sysfs FIXTURE ROOT
//   fake-nvml-tool smi FIXTURE --query-gpu=FIELD,... --format=csv,noheader,nounits
//   fake-nvml-tool smi FIXTURE topo -m
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fixture.h"

namespace {

bool MakeDirs(const std::string& path) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// nvidia-smi's topology label for GPUs a and b, as the stand-in's NVML
// answers for them: NVLinks first, then the PCIe path.
std::string TopoLabel(const fake_nvml::Fixture& fx, unsigned a, unsigned b) {
  unsigned links = 0;
  for (const auto& nl : fx.nvlinks) {
    if ((nl.a == a && nl.b == b) || (nl.a == b && nl.b == a)) links += nl.links;
  }
  if (links > 0) return "NV" + std::to_string(links);
  const auto& x = fx.gpus[a];
  const auto& y = fx.gpus[b];
  if (x.pcie_switch >= 0 && x.pcie_switch == y.pcie_switch) return "PIX";
  if (x.host_bridge >= 0 && x.host_bridge == y.host_bridge) return "PHB";
  if (x.numa_node >= 0 && x.numa_node == y.numa_node) return "NODE";
  return "SYS";
}

// What nvidia-smi prints for one --query-gpu field; empty: unknown field.
std::string QueryField(const fake_nvml::Fixture& fx, size_t i, const std::string& field) {
  const auto& g = fx.gpus[i];
  if (field == "index") return std::to_string(i);
  if (field == "count") return std::to_string(fx.gpus.size());
  if (field == "uuid") return g.uuid;
  if (field == "name") return g.name;
  if (field == "memory.total") return std::to_string(g.memory_mib);
  if (field == "pci.bus_id") return g.pci_bus_id;
  if (field == "driver_version") return fx.driver_version;
  if (field == "compute_cap") return std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
  if (field == "mig.mode.current") return g.mig_enabled ? "Enabled" : "Disabled";
  return "";
}

int Smi(const fake_nvml::Fixture& fx, const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "topo" && args[1] == "-m") {
    const unsigned n = static_cast<unsigned>(fx.gpus.size());
    for (unsigned j = 0; j < n; ++j) std::printf("\tGPU%u", j);
    std::printf("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n");
    for (unsigned i = 0; i < n; ++i) {
      std::printf("GPU%u", i);
      for (unsigned j = 0; j < n; ++j) {
        std::printf("\t%s", i == j ? " X " : TopoLabel(fx, i, j).c_str());
      }
      const int numa = fx.gpus[i].numa_node;
      const std::string affinity = numa >= 0 ? std::to_string(numa) : "N/A";
      std::printf("\tN/A\t%s\t\tN/A\n", affinity.c_str());
    }
    return 0;
  }
  std::string query;
  bool csv = false;
  for (const std::string& a : args) {
    if (a.rfind("--query-gpu=", 0) == 0) query = a.substr(12);
    if (a == "--format=csv,noheader,nounits") csv = true;
  }
  if (query.empty() || !csv) {
    std::fprintf(stderr,
                 "fake-nvml-tool smi answers only --query-gpu=... "
                 "--format=csv,noheader,nounits and topo -m\n");
    return 2;
  }
  std::vector<std::string> fields;
  std::istringstream in(query);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
  for (size_t i = 0; i < fx.gpus.size(); ++i) {
    for (size_t k = 0; k < fields.size(); ++k) {
      const std::string v = QueryField(fx, i, fields[k]);
      if (v.empty()) {
        std::fprintf(stderr, "Field \"%s\" is not a valid field to query.\n", fields[k].c_str());
        return 2;
      }
      std::printf("%s%s", k == 0 ? "" : ", ", v.c_str());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s check FIXTURE | sysfs FIXTURE ROOT | smi FIXTURE ARGS...\n",
                 argv[0]);
    return 2;
  }
  const std::string verb = argv[1];
  fake_nvml::Fixture fx;
  std::string error;
  if (!fake_nvml::LoadFixture(argv[2], &fx, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  if (verb == "check") {
    std::printf("%zu GPUs\n", fx.gpus.size());
    return 0;
  }
  if (verb == "sysfs" && argc == 4) {
    for (const auto& gpu : fx.gpus) {
      std::string bdf;
      for (char c : gpu.pci_bus_id.substr(4)) bdf.push_back(static_cast<char>(std::tolower(c)));
      const std::string dir = std::string(argv[3]) + "/bus/pci/devices/" + bdf;
      if (!MakeDirs(dir)) {
        std::perror(dir.c_str());
        return 1;
      }
      std::ofstream(dir + "/numa_node") << gpu.numa_node << "\n";
      char pci_class[16];
      std::snprintf(pci_class, sizeof pci_class, "0x%06x", gpu.pci_class);
      std::ofstream(dir + "/class") << pci_class << "\n";
    }
    if (!fx.product_name.empty()) {
      const std::string dmi = std::string(argv[3]) + "/devices/virtual/dmi/id";
      if (!MakeDirs(dmi)) {
        std::perror(dmi.c_str());
        return 1;
      }
      std::ofstream(dmi + "/product_name") << fx.product_name << "\n";
    }
    return 0;
  }
  if (verb == "smi") return Smi(fx, std::vector<std::string>(argv + 3, argv + argc));
  std::fprintf(stderr, "unknown command %s\n", verb.c_str());
  return 2;
}
