#include "deviceplugin/plugin_server.h"

#include "base/duration.h"
#include "base/log.h"
#include "base/strings.h"
#include "grpcserver/stream_call.h"
#include "grpcserver/unary_call.h"

namespace gpu_agent::deviceplugin {

using Service = v1beta1::DevicePlugin::AsyncService;

// One ListAndWatch stream, fed by the DevicePublisher from any thread.
class PluginServer::StreamCall final
    : public grpcserver::StreamCall<v1beta1::Empty, v1beta1::ListAndWatchResponse>,
      public DevicePublisher::Subscriber {
 public:
  StreamCall(grpcserver::CqServer* server, Service* async, DevicePluginService* service)
      : grpcserver::StreamCall<v1beta1::Empty, v1beta1::ListAndWatchResponse>(server),
        async_(async),
        service_(service) {}

  void OnSnapshot() override { Pump(); }
  void OnClose() override { Close(grpc::Status::OK); }

 private:
  void RequestCall(grpc::ServerContext* ctx, v1beta1::Empty* request, Writer* writer,
                   void* tag) override {
    async_->RequestListAndWatch(ctx, request, writer, server()->cq(), server()->cq(), tag);
  }

  void Arrived() override {
    if (!server()->shutting_down()) Next<StreamCall>(server(), async_, service_);
    service_->publisher().Subscribe(std::static_pointer_cast<StreamCall>(server()->Kept(this)));
    service_->StreamOpened();
    // A stream that subscribed after Stop() closed the others is closed
    // here, or gRPC's shutdown would wait for it until its deadline. Stop
    // sets the flag before it closes the streams, and both sides take the
    // publisher's lock, so one of the two always sees the other.
    if (server()->shutting_down()) OnClose();
  }

  bool Fill(v1beta1::ListAndWatchResponse* out) override {
    std::shared_ptr<const DeviceSnapshot> snap = service_->publisher().Current();
    if (snap->version == sent_version_) return false;
    FillListAndWatch(*snap, out);
    sent_version_ = snap->version;
    return true;
  }

  void Ended() override { service_->StreamEnded(); }

  Service* const async_;
  DevicePluginService* const service_;
  uint64_t sent_version_ = 0;  // protected by the stream's lock (Fill)
};

PluginServer::PluginServer(std::shared_ptr<DevicePluginService> service)
    : service_(std::move(service)) {}

absl::StatusOr<std::unique_ptr<PluginServer>> PluginServer::Start(
    const std::string& socket_path, std::shared_ptr<DevicePluginService> service) {
  std::unique_ptr<PluginServer> self(new PluginServer(std::move(service)));
  PluginServer* raw = self.get();
  absl::StatusOr<std::unique_ptr<grpcserver::CqServer>> server = grpcserver::CqServer::Start(
      {socket_path, "kubelet.socket folder or kubelet.endpoint", "plugin-serve"}, {&self->async_},
      [raw](grpcserver::CqServer& s) { raw->RequestCalls(s); });
  if (!server.ok()) {
    self->stopped_ = true;
    return server.status();
  }
  self->server_ = *std::move(server);
  return self;
}

namespace {

// Asks for the next call of a unary method whose answer comes at once from
// the service.
template <class Request, class Response>
void AskUnary(grpcserver::CqServer& server, Service* async,
              typename grpcserver::UnaryCall<Service, Request, Response>::Ask ask,
              DevicePluginService* service,
              grpc::Status (*answer)(DevicePluginService&, const Request&, Response*)) {
  using Call = grpcserver::UnaryCall<Service, Request, Response>;
  Call::Next(&server, async, ask, [service, answer](Call& call) {
    call.Finish(answer(*service, call.request(), call.response()));
  });
}

}  // namespace

void PluginServer::RequestCalls(grpcserver::CqServer& server) {
  using D = DevicePluginService;
  D* d = service_.get();
  AskUnary<v1beta1::Empty, v1beta1::DevicePluginOptions>(
      server, &async_, &Service::RequestGetDevicePluginOptions, d,
      [](D& s, const v1beta1::Empty&, v1beta1::DevicePluginOptions* out) {
        return s.GetDevicePluginOptions(out);
      });
  AskUnary<v1beta1::AllocateRequest, v1beta1::AllocateResponse>(
      server, &async_, &Service::RequestAllocate, d,
      [](D& s, const v1beta1::AllocateRequest& in, v1beta1::AllocateResponse* out) {
        return s.Allocate(in, out);
      });
  AskUnary<v1beta1::PreferredAllocationRequest, v1beta1::PreferredAllocationResponse>(
      server, &async_, &Service::RequestGetPreferredAllocation, d,
      [](D& s, const v1beta1::PreferredAllocationRequest& in,
         v1beta1::PreferredAllocationResponse* out) { return s.GetPreferredAllocation(in, out); });
  AskUnary<v1beta1::PreStartContainerRequest, v1beta1::PreStartContainerResponse>(
      server, &async_, &Service::RequestPreStartContainer, d,
      [](D& s, const v1beta1::PreStartContainerRequest& in,
         v1beta1::PreStartContainerResponse* out) { return s.PreStartContainer(in, out); });
  StreamCall::Next<StreamCall>(&server, &async_, d);
}

PluginServer::~PluginServer() { Stop(std::chrono::milliseconds(500)); }

void PluginServer::Stop(std::chrono::milliseconds deadline) {
  if (stopped_) return;
  stopped_ = true;
  server_->StopAsking();  // first: a stream that arrives from here on closes itself
  service_->FinishStreams();
  // The calls first: the streams were just told to finish, and no new call
  // is asked for, so only the few in flight are left; they take microseconds
  // unless a peer does not read what it is sent.
  const bool drained = server_->WaitForCalls(std::chrono::steady_clock::now() + deadline);
  if (!drained) {
    LogWarning("plugin server stop: calls still open at the deadline are cancelled",
               {{"socket", socket_path()},
                {"deadline", FormatDuration(deadline)},
                {"streams", StrCat(service_->OpenStreams())},
                {"calls", StrCat(server_->open_calls())}});
  }
  // Then gRPC's own shutdown, which waits on more than these calls (its
  // connections, closed by each client after a GOAWAY) and can take the
  // whole deadline with every call already ended, holding up the kubelet's
  // registration behind it. With nothing of ours left to finish it gets a
  // short grace, then cancels.
  const auto grace = drained ? kShutdownGrace : std::chrono::milliseconds(0);
  const auto shutdown_started = std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  if (drained && std::chrono::steady_clock::now() - shutdown_started >= grace) {
    LogDebug("plugin server stop: gRPC's shutdown cancelled what was left after the grace",
             {{"socket", socket_path()}, {"grace", FormatDuration(grace)}});
  }
}

}  // namespace gpu_agent::deviceplugin
