// Runs a kubeconfig exec credential plugin and reads the ExecCredential it
// prints (client.authentication.k8s.io v1beta1 or v1).
#ifndef GPU_AGENT_APISERVER_EXEC_CREDENTIAL_H_
#define GPU_AGENT_APISERVER_EXEC_CREDENTIAL_H_

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "apiserver/kubeconfig.h"

namespace gpu_agent::apiserver {

struct ExecCredential {
  std::string token;
  // When the token stops being valid; nullopt: no expiry given.
  std::optional<std::chrono::system_clock::time_point> expires;
};

// Runs the plugin (30 s at most, 1 MiB of output at most). Errors carry the
// exit status and the plugin's stderr, or say what is wrong with its output.
absl::StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& exec);

// Parses the plugin's stdout.
absl::StatusOr<ExecCredential> ParseExecCredential(std::string_view json);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_EXEC_CREDENTIAL_H_
