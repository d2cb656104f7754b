// Registers a device plugin with the kubelet over its unix socket.
#ifndef GPU_AGENT_DEVICEPLUGIN_KUBELET_CLIENT_H_
#define GPU_AGENT_DEVICEPLUGIN_KUBELET_CLIENT_H_

#include <chrono>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace grpc {
class ClientContext;
}

namespace gpu_agent::deviceplugin {

inline constexpr const char* kDevicePluginVersion = "v1beta1";

struct Registration {
  std::string kubelet_socket;  // absolute path of kubelet.sock
  std::string endpoint;        // bare file name of the plugin's socket
  std::string resource_name;
  std::string version = kDevicePluginVersion;
};

// Lets another thread end a call in flight (a Register that waits on a
// kubelet dialing back, when the agent stops). Cancelled once, for good.
class CallCanceller {
 public:
  void Cancel();

 private:
  friend class CallScope;
  std::mutex mu_;
  grpc::ClientContext* call_ = nullptr;  // protected by mu_
  bool cancelled_ = false;               // protected by mu_
};

// Calls Registration.Register. A kubelet since 1.25 dials the plugin back
// and asks its options inside the call (its own dial alone may take 10 s),
// so `timeout` should be well above that. kUnavailable when the kubelet is not there or
// does not answer in time (retry later); kFailedPrecondition with the
// kubelet's own message when it refuses (fix the config).
absl::Status RegisterWithKubelet(const Registration& reg, std::chrono::milliseconds timeout,
                                 CallCanceller* canceller = nullptr);

// Calls the plugin's own GetDevicePluginOptions over its socket, as the
// kubelet would: OK when the server answers within `timeout`.
absl::Status ProbePlugin(const std::string& socket_path, std::chrono::milliseconds timeout);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_KUBELET_CLIENT_H_
