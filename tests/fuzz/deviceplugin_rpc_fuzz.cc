// The device-plugin RPCs the kubelet sends: serialized AllocateRequest,
// PreferredAllocationRequest and PreStartContainerRequest bytes, parsed as
// gRPC parses them and handed to DevicePluginService's handlers (called
// directly, as PluginServer calls them for each request),
// against an 8-GPU NVLink node: whole GPUs, or 4 time-sliced replicas each,
// with two GPUs out.
//
// Input: one byte choosing the RPC, the resource and the Allocate options,
// then the request's protobuf bytes.
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "deviceplugin/allocator.h"
#include "deviceplugin/device_plugin_service.h"
#include "deviceplugin/device_publisher.h"
#include "fuzz_support.h"

using namespace gpu_agent;
using namespace gpu_agent::deviceplugin;

namespace {

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

struct World {
  std::vector<std::shared_ptr<DevicePublisher>> publishers;
  std::vector<std::shared_ptr<const Allocator>> allocators;
};

const World& TheWorld() {
  static const World* world = [] {
    auto* w = new World;
    w->publishers = {Publisher(1, false), Publisher(4, false), Publisher(4, true)};
    // A dev root with the control nodes, so passDeviceSpecs finds them.
    const std::string dev = fuzz::TempDir() + "/dev";
    ::mkdir(dev.c_str(), 0755);
    for (const char* n : {"nvidiactl", "nvidia-uvm"}) fuzz::WriteFileOrDie(dev + "/" + n, "");
    const std::vector<std::vector<std::string>> strategies = {
        {"envvar"}, {"volume-mounts"}, {"cdi-annotations", "cdi-cri"}, {"envvar", "cdi-cri"}};
    for (const auto& s : strategies) {
      for (bool specs : {false, true}) {
        AllocateOptions o;
        o.device_list_strategy = s;
        o.pass_device_specs = specs;
        o.dev_root = fuzz::TempDir();
        o.fail_requests_greater_than_one = specs;
        w->allocators.push_back(std::make_shared<const Allocator>(o));
      }
    }
    return w;
  }();
  return *world;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  (void)TheWorld();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const World& w = TheWorld();
  const uint8_t choice = data[0];
  const auto& publisher = w.publishers[(choice >> 2) % w.publishers.size()];
  const auto& allocator = w.allocators[(choice >> 4) % w.allocators.size()];
  DevicePluginService service(publisher, allocator);
  const void* bytes = data + 1;
  const int n = static_cast<int>(size - 1);
  switch (choice & 3) {
    case 0:
    case 3: {
      v1beta1::AllocateRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      v1beta1::AllocateResponse resp;
      const grpc::Status s = service.Allocate(req, &resp);
      if (s.ok()) {
        fuzz::Check(resp.container_responses_size() == req.container_requests_size(),
                    "Allocate answered another number of containers");
      } else {
        fuzz::Check(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT,
                    "Allocate failed other than INVALID_ARGUMENT");
        fuzz::Check(!s.error_message().empty(), "an Allocate error without a message");
      }
      break;
    }
    case 1: {
      v1beta1::PreferredAllocationRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      v1beta1::PreferredAllocationResponse resp;
      const grpc::Status s = service.GetPreferredAllocation(req, &resp);
      if (s.ok()) {
        for (int i = 0; i < req.container_requests_size(); ++i) {
          fuzz::Check(resp.container_responses(i).deviceids_size() ==
                          req.container_requests(i).allocation_size(),
                      "GetPreferredAllocation answered another size");
        }
      } else {
        fuzz::Check(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT,
                    "GetPreferredAllocation failed other than INVALID_ARGUMENT");
      }
      break;
    }
    case 2: {
      v1beta1::PreStartContainerRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      v1beta1::PreStartContainerResponse resp;
      const grpc::Status s = service.PreStartContainer(req, &resp);
      fuzz::Check(s.ok(), "PreStartContainer failed");
      break;
    }
  }
  return 0;
}
