// One DevicePlugin gRPC server on one unix socket.
#ifndef GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_
#define GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "deviceplugin/device_plugin_service.h"
#include "grpcserver/cq_server.h"

namespace gpu_agent::deviceplugin {

// Serves the DevicePlugin API on the agent's one gRPC server model
// (grpcserver::CqServer: the completion-queue API, one thread of its own
// that blocks with no deadline).
class PluginServer {
 public:
  // Serves `service` on `socket_path`; returns once the socket accepts calls.
  static absl::StatusOr<std::unique_ptr<PluginServer>> Start(
      const std::string& socket_path, std::shared_ptr<DevicePluginService> service);

  // Stops (see Stop) if still running.
  ~PluginServer();

  // Finishes the ListAndWatch streams, waits up to `deadline` for the calls
  // in flight to end (then cancels the rest), stops gRPC's server (within
  // kShutdownGrace more) and removes the socket file if it is still ours.
  void Stop(std::chrono::milliseconds deadline);
  static constexpr std::chrono::milliseconds kShutdownGrace{100};

  const std::string& socket_path() const { return server_->socket_path(); }
  DevicePluginService& service() { return *service_; }
  // Inode of the socket file this server created; a different inode at the
  // path means someone replaced or removed it.
  ino_t socket_inode() const { return server_->socket_inode(); }

  class StreamCall;

 private:
  explicit PluginServer(std::shared_ptr<DevicePluginService> service);
  // Asks gRPC for the next call of each method.
  void RequestCalls(grpcserver::CqServer& server);

  const std::shared_ptr<DevicePluginService> service_;
  v1beta1::DevicePlugin::AsyncService async_;
  std::unique_ptr<grpcserver::CqServer> server_;
  bool stopped_ = false;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_
