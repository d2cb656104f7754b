// The device-plugin API as the kubelet reaches it: request bytes sent over
// the real unix socket to a running PluginServer (gRPC's completion-queue
// server, as plugin mode runs it), as the body of a unary call to
// Allocate, GetPreferredAllocation, PreStartContainer or
// GetDevicePluginOptions. Whatever the bytes, every call is answered within
// its deadline (a stuck or dead server shows as DEADLINE_EXCEEDED or
// UNAVAILABLE), with OK, INVALID_ARGUMENT for a request the service refuses,
// or INTERNAL for bytes that are not the request message; an OK answer parses
// as the response and answers each container asked for.
//
// The server serves 4 time-sliced replicas of each of 8 NVLink GPUs (two
// out), answering with CDI names and device specs (plugin_world.h).
//
// Input: one byte whose low 2 bits choose the method (the rest are unused:
// one server per process), then the request's bytes.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "deviceplugin/api.grpc.pb.h"
#include "deviceplugin/device_plugin_service.h"
#include "deviceplugin/plugin_server.h"
#include "fuzz_support.h"
#include "plugin_world.h"

using namespace gpu_agent;
using namespace gpu_agent::deviceplugin;

namespace {

struct Client {
  std::unique_ptr<PluginServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  grpc::CompletionQueue cq;
};

Client& TheClient() {
  static Client* client = [] {
    auto* c = new Client;
    const fuzz::World& w = fuzz::TheWorld();
    // Time-sliced replicas with two GPUs out; CDI names and device specs.
    auto service = std::make_shared<DevicePluginService>(w.publishers[1], w.allocators[5]);
    const std::string path = fuzz::TempDir() + "/dp.sock";
    absl::StatusOr<std::unique_ptr<PluginServer>> server = PluginServer::Start(path, service);
    fuzz::Check(server.ok(), "the plugin server did not start");
    c->server = *std::move(server);
    c->channel = grpc::CreateChannel("unix://" + path, grpc::InsecureChannelCredentials());
    c->stub = std::make_unique<grpc::GenericStub>(c->channel);
    return c;
  }();
  return *client;
}

// One unary call with `body` as the request; the status and response bytes.
grpc::Status Call(const std::string& method, const std::string& body, std::string* response) {
  Client& c = TheClient();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> call =
      c.stub->PrepareUnaryCall(&ctx, method, request, &c.cq);
  call->StartCall();
  grpc::ByteBuffer answer;
  grpc::Status status;
  int tag = 0;
  call->Finish(&answer, &status, &tag);
  void* got = nullptr;
  bool ok = false;
  fuzz::Check(c.cq.Next(&got, &ok) && got == &tag, "the completion queue lost the call");
  std::vector<grpc::Slice> slices;
  if (status.ok() && answer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) response->append(s.begin(), s.end());
  }
  return status;
}

template <class Request>
bool Parses(const std::string& body) {
  Request r;
  return r.ParseFromString(body);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  (void)TheClient();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string response;
  grpc::Status s;
  bool parses = false;
  switch (data[0] & 3) {
    case 0: {
      s = Call("/v1beta1.DevicePlugin/Allocate", body, &response);
      parses = Parses<v1beta1::AllocateRequest>(body);
      if (s.ok()) {
        v1beta1::AllocateRequest req;
        v1beta1::AllocateResponse resp;
        fuzz::Check(req.ParseFromString(body) && resp.ParseFromString(response) &&
                        resp.container_responses_size() == req.container_requests_size(),
                    "Allocate answered OK, but not one response per container");
      }
      break;
    }
    case 1: {
      s = Call("/v1beta1.DevicePlugin/GetPreferredAllocation", body, &response);
      parses = Parses<v1beta1::PreferredAllocationRequest>(body);
      if (s.ok()) {
        v1beta1::PreferredAllocationRequest req;
        v1beta1::PreferredAllocationResponse resp;
        fuzz::Check(req.ParseFromString(body) && resp.ParseFromString(response) &&
                        resp.container_responses_size() == req.container_requests_size(),
                    "GetPreferredAllocation answered OK, but not one response per container");
      }
      break;
    }
    case 2:
      s = Call("/v1beta1.DevicePlugin/PreStartContainer", body, &response);
      parses = Parses<v1beta1::PreStartContainerRequest>(body);
      break;
    case 3:
      s = Call("/v1beta1.DevicePlugin/GetDevicePluginOptions", body, &response);
      parses = Parses<v1beta1::Empty>(body);
      break;
  }
  const grpc::StatusCode code = s.error_code();
  fuzz::Check(code != grpc::StatusCode::DEADLINE_EXCEEDED && code != grpc::StatusCode::UNAVAILABLE,
              "the plugin server did not answer (stuck or gone)");
  if (parses) {
    fuzz::Check(code == grpc::StatusCode::OK || code == grpc::StatusCode::INVALID_ARGUMENT,
                "a well-formed request answered other than OK or INVALID_ARGUMENT");
  } else {
    fuzz::Check(code == grpc::StatusCode::INTERNAL,
                "bytes that are not the request message answered other than INTERNAL");
  }
  return 0;
}
