// One DevicePlugin gRPC server on one unix socket.
#ifndef GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_
#define GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "base/socket_path.h"
#include "deviceplugin/device_plugin_service.h"

namespace gpu_agent::deviceplugin {

// Serves the DevicePlugin API on gRPC's completion-queue API, driven by one
// thread of its own that blocks with no deadline: idle, it never wakes. (The
// callback API would add gRPC's "nexting" threads, which wake a few times a
// second each and grow with the core count.)
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

  const std::string& socket_path() const { return socket_path_; }
  DevicePluginService& service() { return *service_; }
  // Inode of the socket file this server created; a different inode at the
  // path means someone replaced or removed it.
  ino_t socket_inode() const { return inode_; }

  class Call;
  class StreamCall;

 private:
  template <class Request, class Response>
  class UnaryCall;

  PluginServer(std::string path, std::shared_ptr<DevicePluginService> service);
  // Asks gRPC for the next call of each method.
  void RequestCalls();
  void RequestStream();
  // The completion-queue thread: runs every call's next step.
  void Drive();
  // A stream gRPC is done with.
  void Forget(StreamCall* call);
  // A call that had arrived (unary or stream) was freed: wakes Stop, which
  // waits for them.
  void CallFreed();
  // Runs `start`, which starts one operation on the queue, unless the queue
  // is shut; false then.
  template <class F>
  bool StartOp(F&& start);

  const std::string socket_path_;
  const std::shared_ptr<DevicePluginService> service_;
  v1beta1::DevicePlugin::AsyncService async_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread driver_;
  ino_t inode_ = 0;
  bool stopped_ = false;
  std::atomic<bool> shutting_down_{false};  // no new call is asked for once set
  std::atomic<int> unary_open_{0};          // unary calls arrived and not yet freed
  std::mutex ops_mu_;                       // held while an operation starts
  bool cq_open_ = true;                     // protected by ops_mu_

  std::mutex drain_mu_;  // with drain_cv_: Stop waits for the calls to end
  std::condition_variable drain_cv_;

  std::mutex streams_mu_;
  // Owns each open stream until gRPC is done with it.
  std::unordered_map<StreamCall*, std::shared_ptr<StreamCall>> streams_;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_PLUGIN_SERVER_H_
