// The unix socket a gRPC server for the kubelet listens on (a device plugin,
// a DRA plugin, its registration): its path checked and made ready before
// gRPC binds it.
#ifndef GPU_AGENT_BASE_SOCKET_PATH_H_
#define GPU_AGENT_BASE_SOCKET_PATH_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpu_agent {

// The longest unix socket path gRPC (1.51) binds: 105 bytes, two short of
// the 107 sockaddr_un holds (measured: a 106-byte path is refused "Path name
// should not have more than 107 characters").
inline constexpr size_t kMaxSocketPath = 105;

// Checks that `path` can be a unix socket path (at most kMaxSocketPath) in an
// existing, writable folder that no other user can write
// (CheckTrustedFolder). A stale socket file there is removed; a socket
// another process is serving, or a file that is not a socket, is an error.
// `settings` names what sets the path, for the message when it is too long
// ("kubelet.socket folder or kubelet.endpoint").
absl::Status PrepareSocketPath(const std::string& path, std::string_view settings);

// True when a process accepts connections on the unix socket at `path`.
bool SomeoneServes(const std::string& path);

// Gives the socket gRPC just bound at `path` mode 0600: only its owner (and
// root, the kubelet) may connect.
absl::Status SecureSocket(const std::string& path);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_SOCKET_PATH_H_
