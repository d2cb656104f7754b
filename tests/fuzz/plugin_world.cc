#include "plugin_world.h"

#include <sys/stat.h>

#include <string>

#include "fuzz_support.h"

namespace gpu_agent::fuzz {
namespace {

using deviceplugin::AllocateOptions;
using deviceplugin::Allocator;
using deviceplugin::DevicePublisher;
using deviceplugin::HealthTarget;
using deviceplugin::PluginDevice;
using deviceplugin::ResourceSpec;

// DGX-1 hybrid cube mesh: NV2 = 260, NV1 = 160, otherwise 10.
std::vector<std::vector<int>> CubeMesh() {
  std::vector<std::vector<int>> s(8, std::vector<int>(8, 10));
  const int pairs[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1},
                          {1, 5, 2}, {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1},
                          {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  for (auto& p : pairs) s[p[0]][p[1]] = s[p[1]][p[0]] = 100 * p[2] + 60;
  for (int i = 0; i < 8; ++i) s[i][i] = 0;
  return s;
}

std::shared_ptr<DevicePublisher> Publisher(int replicas, bool pack) {
  ResourceSpec spec;
  spec.resource_name = replicas > 1 ? "nvidia.com/gpu.shared" : "nvidia.com/gpu";
  spec.endpoint = "nvidia-gpu.sock";
  spec.replicated = replicas > 1;
  spec.pack_replicas = pack;
  spec.link_score = CubeMesh();
  for (int g = 0; g < 8; ++g) {
    for (int r = 0; r < replicas; ++r) {
      PluginDevice d;
      d.gpu_uuid = "GPU-" + std::to_string(g) + "a1b2c3-0000-1111-2222-333344445555";
      d.gpu_id = d.gpu_uuid;
      d.id = replicas > 1 ? d.gpu_id + "::" + std::to_string(r) : d.gpu_id;
      d.physical = g;
      d.numa_node = g / 4;
      d.device_nodes = {"/dev/nvidia" + std::to_string(g)};
      spec.devices.push_back(d);
    }
  }
  auto pub = std::make_shared<DevicePublisher>(spec);
  for (int g : {2, 5}) {
    pub->SetHealth(
        HealthTarget{"GPU-" + std::to_string(g) + "a1b2c3-0000-1111-2222-333344445555", -1, -1},
        false);
  }
  return pub;
}

}  // namespace

const World& TheWorld() {
  static const World* world = [] {
    auto* w = new World;
    w->publishers = {Publisher(1, false), Publisher(4, false), Publisher(4, true)};
    // A dev root with the control nodes, so passDeviceSpecs finds them.
    const std::string dev = TempDir() + "/dev";
    ::mkdir(dev.c_str(), 0755);
    for (const char* n : {"nvidiactl", "nvidia-uvm"}) WriteFileOrDie(dev + "/" + n, "");
    const std::vector<std::vector<std::string>> strategies = {
        {"envvar"}, {"volume-mounts"}, {"cdi-annotations", "cdi-cri"}, {"envvar", "cdi-cri"}};
    for (const auto& s : strategies) {
      for (bool specs : {false, true}) {
        AllocateOptions o;
        o.device_list_strategy = s;
        o.pass_device_specs = specs;
        o.dev_root = TempDir();
        o.fail_requests_greater_than_one = specs;
        w->allocators.push_back(std::make_shared<const Allocator>(o));
      }
    }
    return w;
  }();
  return *world;
}

}  // namespace gpu_agent::fuzz
