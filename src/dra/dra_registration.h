// The kubelet's plugin registration for the DRA driver: the registration
// socket in the kubelet's registry folder, whose GetInfo names the driver,
// the DRA socket and the versions served (SupportedVersions), and whose
// NotifyRegistrationStatus says whether the kubelet took the plugin.
#ifndef GPU_AGENT_DRA_DRA_REGISTRATION_H_
#define GPU_AGENT_DRA_DRA_REGISTRATION_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "dra/dra_server.h"
#include "dra/registration.grpc.pb.h"
#include "grpcserver/cq_server.h"

namespace gpu_agent::dra {

// What sets the DRA sockets' paths, named when one is too long.
inline constexpr char kDraSocketSettings[] = "dra.registryDir, dra.pluginDir or dra.driverName";

class RegistrationServer {
 public:
  // `endpoint`: the DRA socket GetInfo names.
  RegistrationServer(std::string driver_name, std::string socket_path, std::string endpoint)
      : driver_name_(std::move(driver_name)),
        socket_path_(std::move(socket_path)),
        endpoint_(std::move(endpoint)) {}

  // Serves the socket on a fresh service (a service serves one server in
  // its life); the server before, if any, is shut down first.
  absl::Status Serve();
  // Shuts the server down (the calls in flight get until `deadline`) and
  // removes the socket if it is still ours.
  void Shutdown(std::chrono::system_clock::time_point deadline);
  bool serving() const { return server_ != nullptr; }
  // True when no server serves the socket (a Serve failed) or its path no
  // longer holds the socket it made.
  bool Gone() const;

  const std::string& socket_path() const { return socket_path_; }
  RegistrationState state() const;
  // Waits up to `within` for the kubelet to say it took the registration,
  // or for Shutdown; whether it has.
  bool WaitRegistered(std::chrono::milliseconds within) const;

 private:
  void Ask(grpcserver::CqServer& server);
  void Notified(bool registered, const std::string& error);

  const std::string driver_name_;
  const std::string socket_path_;
  const std::string endpoint_;
  // The service outlives the server it serves (declared before it).
  std::unique_ptr<pluginregistration::Registration::AsyncService> service_;
  std::unique_ptr<grpcserver::CqServer> server_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  RegistrationState state_;  // protected by mu_
  bool shut_ = false;        // protected by mu_
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_DRA_REGISTRATION_H_
