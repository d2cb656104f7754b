#include "dra/dra_registration.h"

#include "base/file_util.h"
#include "base/log.h"
#include "base/socket_path.h"
#include "base/strings.h"
#include "grpcserver/unary_call.h"

namespace gpu_agent::dra {
namespace {

using pluginregistration::Registration;

std::string RegistrationSocketPath(const DraServerOptions& o, std::string_view tag) {
  return StrCat(o.registry_dir, "/", o.driver_name, tag.empty() ? "" : "-", tag, "-reg.sock");
}

std::string PluginSocketPath(const DraServerOptions& o, std::string_view tag) {
  return StrCat(o.plugin_dir, "/", o.driver_name, "/dra", tag.empty() ? "" : "-", tag, ".sock");
}

}  // namespace

std::string InstanceTag(const DraServerOptions& o) {
  if (RegistrationSocketPath(o, o.instance).size() <= kMaxSocketPath &&
      PluginSocketPath(o, o.instance).size() <= kMaxSocketPath) {
    return o.instance;
  }
  return o.instance.substr(0, 8);
}

std::string RegistrationSocketPath(const DraServerOptions& o) {
  return RegistrationSocketPath(o, InstanceTag(o));
}

std::string PluginSocketPath(const DraServerOptions& o) {
  return PluginSocketPath(o, InstanceTag(o));
}

// The DRA versions first (the kubelet takes the first of them it knows),
// then the health stream's: a kubelet takes the newest of those it knows,
// and one that knows none ignores them.
const std::vector<std::string>& SupportedVersions() {
  static const auto* versions =
      new std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                   "v1beta1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"};
  return *versions;
}

absl::Status RegistrationServer::Serve() {
  if (server_) Shutdown(std::chrono::system_clock::now());
  service_ = std::make_unique<Registration::AsyncService>();
  absl::StatusOr<std::unique_ptr<grpcserver::CqServer>> server =
      grpcserver::CqServer::Start({socket_path_, kDraSocketSettings, "dra-register"},
                                  {service_.get()}, [this](grpcserver::CqServer& s) { Ask(s); });
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  return absl::OkStatus();
}

void RegistrationServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_ = true;
  }
  cv_.notify_all();
  if (!server_) return;
  server_->Shutdown(deadline);
  server_.reset();
}

bool RegistrationServer::Gone() const {
  return server_ == nullptr || InodeOf(socket_path_) != server_->socket_inode();
}

RegistrationState RegistrationServer::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void RegistrationServer::Ask(grpcserver::CqServer& server) {
  using Info = grpcserver::UnaryCall<Registration::AsyncService, pluginregistration::InfoRequest,
                                     pluginregistration::PluginInfo>;
  using Status =
      grpcserver::UnaryCall<Registration::AsyncService, pluginregistration::RegistrationStatus,
                            pluginregistration::RegistrationStatusResponse>;
  Info::Next(&server, service_.get(), &Registration::AsyncService::RequestGetInfo,
             [this](Info& call) {
               pluginregistration::PluginInfo* info = call.response();
               info->set_type("DRAPlugin");
               info->set_name(driver_name_);
               info->set_endpoint(endpoint_);
               for (const std::string& v : SupportedVersions()) info->add_supported_versions(v);
               {
                 std::lock_guard<std::mutex> lock(mu_);
                 ++state_.info_calls;
               }
               call.Finish(grpc::Status::OK);
             });
  Status::Next(&server, service_.get(),
               &Registration::AsyncService::RequestNotifyRegistrationStatus, [this](Status& call) {
                 Notified(call.request().plugin_registered(), call.request().error());
                 call.Finish(grpc::Status::OK);
               });
}

bool RegistrationServer::WaitRegistered(std::chrono::milliseconds within) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, within, [this] { return state_.registered || shut_; });
  return state_.registered;
}

void RegistrationServer::Notified(bool registered, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_.registered = registered;
    if (registered) {
      ++state_.registrations;
    } else {
      ++state_.refusals;
      state_.last_refusal = error;
    }
  }
  cv_.notify_all();
  if (registered) {
    LogInfo("registered with the kubelet as a DRA driver", {{"driver", driver_name_}});
  } else {
    // The kubelet tries again with its own backoff while the socket is
    // there; what it said is all an operator can go on.
    LogError("the kubelet refused the DRA driver's registration",
             {{"driver", driver_name_}, {"reason", error}});
  }
}

}  // namespace gpu_agent::dra
