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

// Calls `method` with `body` and checks the answer: in time; OK or
// INVALID_ARGUMENT when the body is a Request, INTERNAL when it is not; and
// an OK answer a Response that `answers(request, response)` accepts.
template <class Request, class Response>
void Exercise(const std::string& method, const std::string& body,
              bool (*answers)(const Request&, const Response&), const char* what) {
  std::string answer;
  const grpc::Status s = Call(method, body, &answer);
  const grpc::StatusCode code = s.error_code();
  fuzz::Check(code != grpc::StatusCode::DEADLINE_EXCEEDED && code != grpc::StatusCode::UNAVAILABLE,
              "the plugin server did not answer (stuck or gone)");
  Request req;
  if (!req.ParseFromString(body)) {
    fuzz::Check(code == grpc::StatusCode::INTERNAL,
                "bytes that are not the request message answered other than INTERNAL");
    return;
  }
  fuzz::Check(code == grpc::StatusCode::OK || code == grpc::StatusCode::INVALID_ARGUMENT,
              "a well-formed request answered other than OK or INVALID_ARGUMENT");
  if (!s.ok()) return;
  Response resp;
  fuzz::Check(resp.ParseFromString(answer) && answers(req, resp), what);
}

// One response per container asked for.
template <class Request, class Response>
bool PerContainer(const Request& req, const Response& resp) {
  return resp.container_responses_size() == req.container_requests_size();
}

template <class Request, class Response>
bool Any(const Request&, const Response&) {
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietPluginLogs();
  (void)TheClient();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  using namespace v1beta1;
  switch (data[0] & 3) {
    case 0:
      Exercise<AllocateRequest, AllocateResponse>(
          "/v1beta1.DevicePlugin/Allocate", body, PerContainer,
          "Allocate answered OK, but not one response per container");
      break;
    case 1:
      Exercise<PreferredAllocationRequest, PreferredAllocationResponse>(
          "/v1beta1.DevicePlugin/GetPreferredAllocation", body, PerContainer,
          "GetPreferredAllocation answered OK, but not one response per container");
      break;
    case 2:
      Exercise<PreStartContainerRequest, PreStartContainerResponse>(
          "/v1beta1.DevicePlugin/PreStartContainer", body, Any,
          "PreStartContainer answered OK with something else than its response");
      break;
    case 3:
      Exercise<Empty, DevicePluginOptions>(
          "/v1beta1.DevicePlugin/GetDevicePluginOptions", body, Any,
          "GetDevicePluginOptions answered OK with something else than its options");
      break;
  }
  return 0;
}
