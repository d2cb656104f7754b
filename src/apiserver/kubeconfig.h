// kubeconfig files: several merged first-wins (KUBECONFIG=a:b), a context
// chosen by --context or current-context, and what it says about the
// server (CA, insecure, tls-server-name) and the user (token, tokenFile,
// client certificate and key, exec credential plugin). Relative paths are
// resolved against the file that names them.
#ifndef GPU_AGENT_APISERVER_KUBECONFIG_H_
#define GPU_AGENT_APISERVER_KUBECONFIG_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpu_agent::apiserver {

struct ExecConfig {
  std::string command;  // absolute, or resolved against the kubeconfig folder if it has a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string api_version;
};

struct KubeconfigSelection {
  std::string context;
  std::string server;
  std::string ca_file;
  std::string ca_pem;  // from certificate-authority-data
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string token;
  std::string token_file;
  std::string client_cert_file, client_key_file;
  std::string client_cert_pem, client_key_pem;  // from the -data forms
  std::optional<ExecConfig> exec;
};

// A bearer token goes into the Authorization header as it is: printable
// ASCII without blanks (RFC 6750's b64token, and every token Kubernetes
// issues, fit). Anything else (a NUL, a line break that would end the header
// early, bytes of another encoding) is refused, naming the first bad byte's
// offset and value, never the token.
absl::Status CheckBearerToken(std::string_view token);

// `paths`: one file, or several separated by ':'. Errors name the file
// (file:line:column for YAML), the context, cluster or user.
absl::StatusOr<KubeconfigSelection> LoadKubeconfig(const std::string& paths,
                                                   const std::string& context);

// Standard base64 (absl::Base64Unescape: whitespace skipped, padding
// optional but only at the end); false on any invalid input.
bool Base64Decode(std::string_view in, std::string* out);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_KUBECONFIG_H_
