// The unix socket a device-plugin server listens on: its path checked and
// made ready before gRPC binds it.
#ifndef GPU_AGENT_DEVICEPLUGIN_SOCKET_PATH_H_
#define GPU_AGENT_DEVICEPLUGIN_SOCKET_PATH_H_

#include <string>

#include "absl/status/status.h"

namespace gpu_agent::deviceplugin {

// Checks that `path` can be a unix socket path (at most 107 bytes) in an
// existing, writable folder. A stale socket file there is removed; a socket
// another process is serving, or a file that is not a socket, is an error.
absl::Status PrepareSocketPath(const std::string& path);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_SOCKET_PATH_H_
