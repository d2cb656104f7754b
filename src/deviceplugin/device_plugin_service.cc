#include "deviceplugin/device_plugin_service.h"

#include "base/log.h"
#include "base/strings.h"
#include "deviceplugin/preferred_allocation.h"

namespace gpu_agent::deviceplugin {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  const auto code = s.code() == absl::StatusCode::kInvalidArgument
                        ? grpc::StatusCode::INVALID_ARGUMENT
                        : grpc::StatusCode::INTERNAL;
  return grpc::Status(code, std::string(s.message()));
}

}  // namespace

void FillListAndWatch(const DeviceSnapshot& snap, v1beta1::ListAndWatchResponse* out) {
  out->Clear();
  out->mutable_devices()->Reserve(static_cast<int>(snap.devices.size()));
  for (const PluginDevice& d : snap.devices) {
    v1beta1::Device* dev = out->add_devices();
    dev->set_id(d.id);
    dev->set_health(d.healthy ? "Healthy" : "Unhealthy");
    if (d.numa_node >= 0) dev->mutable_topology()->add_nodes()->set_id(d.numa_node);
  }
}

// One ListAndWatch stream. States: idle (nothing to send), writing (one
// StartWrite in flight), finished (Finish called; waiting for OnDone).
class DevicePluginService::StreamReactor
    : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>,
      public DevicePublisher::Subscriber {
 public:
  StreamReactor(DevicePluginService* service) : service_(service) {}

  void Begin() { MaybeWrite(); }

  void OnSnapshot() override { MaybeWrite(); }

  void OnClose() override {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    if (!writing_) FinishLocked(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) {
        // The kubelet went away; nothing more can be written.
        FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broken"));
        return;
      }
      if (closing_) {
        FinishLocked(grpc::Status::OK);
        return;
      }
    }
    MaybeWrite();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    if (!writing_) FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override { service_->Forget(this); }

 private:
  void MaybeWrite() {
    std::shared_ptr<const DeviceSnapshot> snap = service_->publisher_->Current();
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || writing_ || closing_ || snap->version == sent_version_) return;
    FillListAndWatch(*snap, &response_);
    sent_version_ = snap->version;
    writing_ = true;
    StartWrite(&response_);
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  DevicePluginService* const service_;
  std::mutex mu_;
  bool writing_ = false;   // protected by mu_
  bool closing_ = false;   // protected by mu_
  bool finished_ = false;  // protected by mu_
  uint64_t sent_version_ = 0;
  v1beta1::ListAndWatchResponse response_;  // owned by the write in flight
};

DevicePluginService::DevicePluginService(std::shared_ptr<DevicePublisher> publisher,
                                         std::shared_ptr<const Allocator> allocator)
    : publisher_(std::move(publisher)), allocator_(std::move(allocator)) {}

DevicePluginService::~DevicePluginService() = default;

grpc::ServerUnaryReactor* DevicePluginService::GetDevicePluginOptions(
    grpc::CallbackServerContext* ctx, const v1beta1::Empty*,
    v1beta1::DevicePluginOptions* response) {
  response->set_pre_start_required(false);
  response->set_get_preferred_allocation_available(true);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* DevicePluginService::ListAndWatch(
    grpc::CallbackServerContext*, const v1beta1::Empty*) {
  auto reactor = std::make_shared<StreamReactor>(this);
  std::vector<std::shared_ptr<StreamReactor>> done;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_.emplace(reactor.get(), reactor);
    done.swap(finished_);
  }
  ++stats_.streams_opened;
  publisher_->Subscribe(reactor);
  reactor->Begin();
  LogInfo("kubelet opened ListAndWatch", {{"resource", publisher_->resource_name()}});
  if (observer_) observer_();
  return reactor.get();
}

void DevicePluginService::Forget(StreamReactor* reactor) {
  // gRPC may call OnDone from inside Finish, with the reactor's own lock
  // held up the stack; so the reactor is not destroyed here but parked, and
  // freed when the next stream opens or the service goes.
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    auto it = streams_.find(reactor);
    if (it != streams_.end()) {
      finished_.push_back(std::move(it->second));
      streams_.erase(it);
    }
  }
  if (observer_) observer_();  // unlocked: it takes the supervisor's lock
}

void DevicePluginService::FinishStreams() { publisher_->CloseAll(); }

size_t DevicePluginService::OpenStreams() const {
  std::lock_guard<std::mutex> lock(streams_mu_);
  return streams_.size();
}

grpc::ServerUnaryReactor* DevicePluginService::Allocate(grpc::CallbackServerContext* ctx,
                                                        const v1beta1::AllocateRequest* request,
                                                        v1beta1::AllocateResponse* response) {
  ++stats_.allocate_calls;
  const auto started = std::chrono::steady_clock::now();
  std::shared_ptr<const DeviceSnapshot> snap = publisher_->Current();
  absl::Status status;
  for (int i = 0; i < request->container_requests_size() && status.ok(); ++i) {
    status = allocator_->AllocateContainer(*snap, request->container_requests(i),
                                           response->add_container_responses());
    if (!status.ok() && request->container_requests_size() > 1) {
      status = absl::InvalidArgumentError(StrCat("container request ", i, ": ", status.message()));
    }
  }
  if (request->container_requests_size() == 0) {
    status = absl::InvalidArgumentError("Allocate request has no container requests");
  }
  if (!status.ok()) {
    ++stats_.allocate_errors;
    response->Clear();
    LogWarning("Allocate refused",
               {{"resource", snap->resource_name}, {"error", std::string(status.message())}});
  }
  stats_.ObserveAllocate(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now() - started)
                                                   .count()));
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

grpc::ServerUnaryReactor* DevicePluginService::GetPreferredAllocation(
    grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* response) {
  ++stats_.preferred_calls;
  std::shared_ptr<const DeviceSnapshot> snap = publisher_->Current();
  absl::Status status;
  for (int i = 0; i < request->container_requests_size() && status.ok(); ++i) {
    const auto& req = request->container_requests(i);
    absl::StatusOr<std::vector<std::string>> ids = PreferredAllocation(
        *snap, {req.available_deviceids().begin(), req.available_deviceids().end()},
        {req.must_include_deviceids().begin(), req.must_include_deviceids().end()},
        req.allocation_size());
    if (!ids.ok()) {
      status =
          absl::InvalidArgumentError(StrCat("container request ", i, ": ", ids.status().message()));
      break;
    }
    auto* out = response->add_container_responses();
    for (std::string& id : *ids) out->add_deviceids(std::move(id));
  }
  if (!status.ok()) {
    ++stats_.preferred_errors;
    response->Clear();
    LogWarning("GetPreferredAllocation refused",
               {{"resource", snap->resource_name}, {"error", std::string(status.message())}});
  }
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

grpc::ServerUnaryReactor* DevicePluginService::PreStartContainer(
    grpc::CallbackServerContext* ctx, const v1beta1::PreStartContainerRequest*,
    v1beta1::PreStartContainerResponse*) {
  // Nothing to prepare: GetDevicePluginOptions says pre_start_required=false,
  // but a kubelet that calls anyway gets a success.
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gpu_agent::deviceplugin
