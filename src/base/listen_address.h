// The metrics endpoint's listen address (metrics.address): parsed into host
// and port, and checked.
#ifndef GPU_AGENT_BASE_LISTEN_ADDRESS_H_
#define GPU_AGENT_BASE_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpu_agent {

struct HostPort {
  std::string host;
  int port = -1;
};

// "host:port", ":port" (all addresses) or "[v6]:port"; port 0 picks one.
// An empty host is 0.0.0.0. Errors name metrics.address.
absl::StatusOr<HostPort> ParseListenAddress(const std::string& address);

// ParseListenAddress's verdict alone.
absl::Status ValidateListenAddress(const std::string& address);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_LISTEN_ADDRESS_H_
