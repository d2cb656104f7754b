// The device-plugin RPCs the kubelet sends: serialized AllocateRequest,
// PreferredAllocationRequest and PreStartContainerRequest bytes, parsed as
// gRPC parses them and handed to DevicePluginService's handlers (called
// directly, as PluginServer calls them for each request),
// against an 8-GPU NVLink node: whole GPUs, or 4 time-sliced replicas each,
// with two GPUs out.
//
// Input: one byte choosing the RPC, the resource and the Allocate options,
// then the request's protobuf bytes.
#include <memory>
#include <string>
#include <vector>

#include "deviceplugin/allocator.h"
#include "deviceplugin/device_plugin_service.h"
#include "deviceplugin/device_publisher.h"
#include "fuzz_support.h"
#include "plugin_world.h"

using namespace gpu_agent;
using namespace gpu_agent::deviceplugin;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietPluginLogs();
  (void)fuzz::TheWorld();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const fuzz::World& w = fuzz::TheWorld();
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
