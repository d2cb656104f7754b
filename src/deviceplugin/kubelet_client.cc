#include "deviceplugin/kubelet_client.h"

#include <grpcpp/grpcpp.h>

#include "base/strings.h"
#include "deviceplugin/api.grpc.pb.h"

namespace gpu_agent::deviceplugin {

void CallCanceller::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (call_ != nullptr) call_->TryCancel();
}

// Makes a call cancellable through a CallCanceller while in scope.
class CallScope {
 public:
  CallScope(CallCanceller* c, grpc::ClientContext* ctx) : c_(c) {
    if (c_ == nullptr) return;
    std::lock_guard<std::mutex> lock(c_->mu_);
    if (c_->cancelled_) ctx->TryCancel();
    c_->call_ = ctx;
  }
  ~CallScope() {
    if (c_ == nullptr) return;
    std::lock_guard<std::mutex> lock(c_->mu_);
    c_->call_ = nullptr;
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  CallCanceller* const c_;
};

absl::Status RegisterWithKubelet(const Registration& reg, std::chrono::milliseconds timeout,
                                 CallCanceller* canceller) {
  grpc::ChannelArguments args;
  // Fail fast instead of waiting out reconnect backoff: the caller retries.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  auto channel = grpc::CreateCustomChannel("unix://" + reg.kubelet_socket,
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(reg.version);
  request.set_endpoint(reg.endpoint);
  request.set_resource_name(reg.resource_name);
  request.mutable_options()->set_pre_start_required(false);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Status status;
  {
    CallScope scope(canceller, &ctx);
    status = stub->Register(&ctx, request, &response);
  }
  if (status.ok()) return absl::OkStatus();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return absl::UnavailableError(
          StrCat("kubelet at ", reg.kubelet_socket, " is not answering: ", status.error_message()));
    default:
      return absl::FailedPreconditionError(
          StrCat("kubelet refused to register ", reg.resource_name, ": ", status.error_message()));
  }
}

absl::Status ProbePlugin(const std::string& socket_path, std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel("unix://" + socket_path, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  v1beta1::Empty request;
  v1beta1::DevicePluginOptions response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Status status = stub->GetDevicePluginOptions(&ctx, request, &response);
  if (status.ok()) return absl::OkStatus();
  return absl::UnavailableError(StrCat("the device plugin server on ", socket_path,
                                       " does not answer: ", status.error_message()));
}

}  // namespace gpu_agent::deviceplugin
