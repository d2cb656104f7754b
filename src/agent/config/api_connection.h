// The API server connection the apiServer.* settings describe, and the REST
// client a one-shot command (capacity, labels) talks through.
#ifndef GPU_AGENT_AGENT_CONFIG_API_CONNECTION_H_
#define GPU_AGENT_AGENT_CONFIG_API_CONNECTION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "apiserver/connection.h"
#include "apiserver/rest_client.h"

namespace gpu_agent {

apiserver::ConnectionOptions ConnectionOptionsFrom(const Config& config);
// The connection the apiServer.* settings describe, resolved in this
// process's environment (in-cluster variables, kubeconfig, proxy).
absl::StatusOr<apiserver::Connection> ConnectionFor(const Config& config);
// What every client of the agent's sends and waits: the User-Agent
// gpu-agent/<version> and apiServer.requestTimeout as the read timeout.
apiserver::RestOptions RestOptionsFor(const Config& config);

// The API server client of a one-shot command (capacity, labels): the
// config's connection, its request timeout bounding connects too. On a
// failure, `*exit_code` is how to exit: kExitUsage for a setting in error.
absl::StatusOr<std::unique_ptr<apiserver::RestClient>> CommandRestClient(const Config& config,
                                                                         int* exit_code);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_API_CONNECTION_H_
