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

DevicePluginService::DevicePluginService(std::shared_ptr<DevicePublisher> publisher,
                                         std::shared_ptr<const Allocator> allocator)
    : publisher_(std::move(publisher)), allocator_(std::move(allocator)) {}

grpc::Status DevicePluginService::GetDevicePluginOptions(
    v1beta1::DevicePluginOptions* response) const {
  response->set_pre_start_required(false);
  response->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

void DevicePluginService::StreamOpened() {
  ++open_streams_;
  ++stats_.streams_opened;
  LogInfo("kubelet opened ListAndWatch", {{"resource", publisher_->resource_name()}});
  if (observer_) observer_();
}

void DevicePluginService::StreamEnded() {
  --open_streams_;
  if (observer_) observer_();  // unlocked: it takes the supervisor's lock
}

void DevicePluginService::FinishStreams() { publisher_->CloseAll(); }

grpc::Status DevicePluginService::Allocate(const v1beta1::AllocateRequest& request,
                                           v1beta1::AllocateResponse* response) {
  ++stats_.allocate_calls;
  const auto started = std::chrono::steady_clock::now();
  std::shared_ptr<const DeviceSnapshot> snap = publisher_->Current();
  absl::Status status;
  for (int i = 0; i < request.container_requests_size() && status.ok(); ++i) {
    status = allocator_->AllocateContainer(*snap, request.container_requests(i),
                                           response->add_container_responses());
    if (!status.ok() && request.container_requests_size() > 1) {
      status = absl::InvalidArgumentError(StrCat("container request ", i, ": ", status.message()));
    }
  }
  if (request.container_requests_size() == 0) {
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
  return ToGrpc(status);
}

grpc::Status DevicePluginService::GetPreferredAllocation(
    const v1beta1::PreferredAllocationRequest& request,
    v1beta1::PreferredAllocationResponse* response) {
  ++stats_.preferred_calls;
  std::shared_ptr<const DeviceSnapshot> snap = publisher_->Current();
  absl::Status status;
  for (int i = 0; i < request.container_requests_size() && status.ok(); ++i) {
    const auto& req = request.container_requests(i);
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
  return ToGrpc(status);
}

grpc::Status DevicePluginService::PreStartContainer(const v1beta1::PreStartContainerRequest&,
                                                    v1beta1::PreStartContainerResponse*) const {
  // Nothing to prepare: GetDevicePluginOptions says pre_start_required=false,
  // but a kubelet that calls anyway gets a success.
  return grpc::Status::OK;
}

}  // namespace gpu_agent::deviceplugin
