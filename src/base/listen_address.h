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

// "host:port", ":port" (all addresses), "[v6]:port", or an IPv6 address
// without brackets followed by ":port" ("fd00::5:9400", what a manifest's
// "$(POD_IP):9400" gives on a single-stack IPv6 pod): with more than one
// ':' and no brackets, the text before the last ':' must be an IPv6 address
// and what follows it is the port. The port is always required; 0 picks
// one. An empty host is 0.0.0.0. Errors name metrics.address.
absl::StatusOr<HostPort> ParseListenAddress(const std::string& address);

// ParseListenAddress's verdict alone.
absl::Status ValidateListenAddress(const std::string& address);

// "host:port", with brackets round an IPv6 host: what a log line or a URL
// names.
std::string FormatHostPort(const std::string& host, int port);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_LISTEN_ADDRESS_H_
