// Registers a device plugin with the kubelet over its unix socket.
#ifndef GPU_AGENT_DEVICEPLUGIN_KUBELET_CLIENT_H_
#define GPU_AGENT_DEVICEPLUGIN_KUBELET_CLIENT_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace gpu_agent::deviceplugin {

inline constexpr const char* kDevicePluginVersion = "v1beta1";

struct Registration {
  std::string kubelet_socket;  // absolute path of kubelet.sock
  std::string endpoint;        // bare file name of the plugin's socket
  std::string resource_name;
  std::string version = kDevicePluginVersion;
};

// Calls Registration.Register. kUnavailable when the kubelet is not there or
// does not answer in time (retry later); kFailedPrecondition with the
// kubelet's own message when it refuses (fix the config).
absl::Status RegisterWithKubelet(const Registration& reg, std::chrono::milliseconds timeout);

// Calls the plugin's own GetDevicePluginOptions over its socket, as the
// kubelet would: OK when the server answers within `timeout`.
absl::Status ProbePlugin(const std::string& socket_path, std::chrono::milliseconds timeout);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_KUBELET_CLIENT_H_
