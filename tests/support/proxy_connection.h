// A connection to an API server (the stand-in) through its URL, as through
// `kubectl proxy`: no credentials, no environment read.
#ifndef GPU_AGENT_TESTS_SUPPORT_PROXY_CONNECTION_H_
#define GPU_AGENT_TESTS_SUPPORT_PROXY_CONNECTION_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"

namespace gpu_agent::testing {

inline absl::StatusOr<apiserver::Connection> ProxyConnection(const std::string& url) {
  apiserver::ConnectionOptions options;
  options.proxy = url;
  return apiserver::ResolveConnection(
      options, [](const std::string&) { return std::optional<std::string>(); });
}

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_PROXY_CONNECTION_H_
