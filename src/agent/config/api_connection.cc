// apiServer.* settings to connection options, and a one-shot command's client.
#include "agent/config/api_connection.h"

#include <algorithm>

#include "agent/config/config_loader.h"
#include "base/exit_code.h"
#include "base/strings.h"
#include "base/version.h"

namespace gpu_agent {

apiserver::ConnectionOptions ConnectionOptionsFrom(const Config& c) {
  apiserver::ConnectionOptions o;
  o.proxy = c.api_server.proxy;
  o.server = c.api_server.server;
  o.token_file = c.api_server.token_file;
  o.certificate_authority = c.api_server.certificate_authority;
  o.insecure_skip_tls_verify = c.api_server.insecure_skip_tls_verify;
  o.kubeconfig = c.api_server.kubeconfig;
  o.context = c.api_server.context;
  // For tests and unusual pods: where the service account is mounted.
  if (auto dir = ProcessEnv()("GPU_AGENT_SERVICE_ACCOUNT_DIR"); dir && !dir->empty()) {
    o.service_account_dir = *dir;
  }
  return o;
}

absl::StatusOr<apiserver::Connection> ConnectionFor(const Config& config) {
  return apiserver::ResolveConnection(ConnectionOptionsFrom(config), ProcessEnv());
}

apiserver::RestOptions RestOptionsFor(const Config& config) {
  apiserver::RestOptions opts;
  opts.user_agent = StrCat("gpu-agent/", kVersion);
  opts.read_timeout = config.api_server.request_timeout;
  return opts;
}

absl::StatusOr<std::unique_ptr<apiserver::RestClient>> CommandRestClient(const Config& config,
                                                                         int* exit_code) {
  *exit_code = kExitFailure;
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  if (!conn.ok()) {
    *exit_code = ExitCodeFor(conn.status());
    return conn.status();
  }
  apiserver::RestOptions opts = RestOptionsFor(config);
  opts.connect_timeout = std::min(opts.connect_timeout, config.api_server.request_timeout);
  return apiserver::RestClient::Create(*conn, opts);
}

}  // namespace gpu_agent
