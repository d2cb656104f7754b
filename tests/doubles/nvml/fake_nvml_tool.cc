// Helper for tests and the demo: checks a fixture, or writes the sysfs files
// the agent reads for it (NUMA nodes, PCI classes, the DMI product name),
// since NVML does not report them.
//   fake-nvml-tool check FIXTURE
//   fake-nvml-tool sysfs FIXTURE ROOT
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s check FIXTURE | sysfs FIXTURE ROOT\n", argv[0]);
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
  std::fprintf(stderr, "unknown command %s\n", verb.c_str());
  return 2;
}
