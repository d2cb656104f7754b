#include "plugin_world.h"

#include <google/protobuf/stubs/logging.h>
#include <sys/stat.h>

#include <string>

#include "fuzz_support.h"
#include "support/plugin_devices.h"

namespace gpu_agent::fuzz {
namespace {

using deviceplugin::AllocateOptions;
using deviceplugin::Allocator;
using deviceplugin::DeviceListStrategies;
using deviceplugin::DevicePublisher;
using deviceplugin::ResourceSpec;

std::string Uuid(int g) {
  return "GPU-" + std::to_string(g) + "a1b2c3-0000-1111-2222-333344445555";
}

std::shared_ptr<DevicePublisher> Publisher(int replicas, bool pack) {
  ResourceSpec spec;
  spec.resource_name = replicas > 1 ? "nvidia.com/gpu.shared" : "nvidia.com/gpu";
  spec.endpoint = "nvidia-gpu.sock";
  spec.replicated = replicas > 1;
  spec.pack_replicas = pack;
  spec.link_score = testing::CubeMeshScores();
  spec.devices = testing::GpuDevices(8, replicas, Uuid);
  auto pub = std::make_shared<DevicePublisher>(spec);
  for (int g : {2, 5}) {
    pub->SetHealth(DeviceKey::Gpu(Uuid(g)), false);
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
        o.device_list = *DeviceListStrategies::Parse(s);
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

void QuietPluginLogs() {
  QuietLogs();
  google::protobuf::SetLogHandler(nullptr);
}

}  // namespace gpu_agent::fuzz
