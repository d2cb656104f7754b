// One DevicePlugin gRPC server on one unix socket.
#ifndef GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_
#define GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "deviceplugin/device_plugin_service.h"

namespace gpu_agent::deviceplugin {

// Checks that `path` can be a unix socket path (at most 107 bytes) in an
// existing, writable folder. A stale socket file there is removed; a socket
// another process is serving, or a file that is not a socket, is an error.
absl::Status PrepareSocketPath(const std::string& path);

class PluginServer {
 public:
  // Serves `service` on `socket_path`; returns once the socket accepts calls.
  static absl::StatusOr<std::unique_ptr<PluginServer>> Start(
      const std::string& socket_path, std::shared_ptr<DevicePluginService> service);

  // Stops (see Stop) if still running.
  ~PluginServer();

  // Finishes the ListAndWatch streams, stops the server (calls still running
  // after `deadline` are cancelled) and removes the socket file if it is
  // still ours.
  void Stop(std::chrono::milliseconds deadline);

  const std::string& socket_path() const { return socket_path_; }
  DevicePluginService& service() { return *service_; }
  // Inode of the socket file this server created; a different inode at the
  // path means someone replaced or removed it.
  ino_t socket_inode() const { return inode_; }

 private:
  PluginServer(std::string path, std::shared_ptr<DevicePluginService> service,
               std::unique_ptr<grpc::Server> server, ino_t inode)
      : socket_path_(std::move(path)),
        service_(std::move(service)),
        server_(std::move(server)),
        inode_(inode) {}

  const std::string socket_path_;
  std::shared_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  ino_t inode_;
  bool stopped_ = false;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_
