// Where the API server is and how to authenticate: kubectl proxy, an explicit
// server URL, or in-cluster (service account). Plain data plus a token source
// that re-reads rotating token files.
#ifndef GPU_AGENT_APISERVER_CONNECTION_H_
#define GPU_AGENT_APISERVER_CONNECTION_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "apiserver/kubeconfig.h"

namespace gpu_agent::apiserver {

struct Endpoint {
  std::string scheme;  // http | https
  std::string host;    // without brackets
  int port = 0;
  std::string path_prefix;  // "" or "/prefix" (no trailing slash)
  // "https://[fd00::1]:6443/prefix"
  std::string Url() const;
};

// Parses "https://host[:port][/prefix]", "http://127.0.0.1:8001", IPv6 in
// brackets. Errors name the URL and what is wrong.
absl::StatusOr<Endpoint> ParseServerUrl(std::string_view url);

// A bearer token from a fixed string or a file. Files are re-read when older
// than the refresh interval and at once after Invalidate() (a 401), since
// projected service-account tokens rotate. Thread-safe.
class TokenSource {
 public:
  static std::shared_ptr<TokenSource> Fixed(std::string token);
  static std::shared_ptr<TokenSource> FromFile(
      std::string path, std::chrono::seconds refresh = std::chrono::seconds(60));
  // Runs a kubeconfig exec plugin; its token is cached until it expires
  // (or, without an expiry, until a 401).
  static std::shared_ptr<TokenSource> FromExec(ExecConfig exec);
  absl::StatusOr<std::string> Token();
  void Invalidate();
  bool rereadable() const { return !path_.empty() || exec_.has_value(); }
  const std::string& path() const { return path_; }

 private:
  std::mutex mu_;
  std::string token_;
  std::string path_;
  std::chrono::seconds refresh_{60};
  std::chrono::steady_clock::time_point read_at_{};
  bool valid_ = false;
  std::optional<ExecConfig> exec_;
  std::optional<std::chrono::system_clock::time_point> expires_;
};

struct Connection {
  Endpoint endpoint;
  std::string ca_file;  // empty: the system's CAs (or ca_pem)
  std::string ca_pem;
  std::string tls_server_name;  // verify the certificate for this name instead of the host
  std::string client_cert_file, client_key_file;
  std::string client_cert_pem, client_key_pem;
  bool insecure_skip_verify = false;
  std::shared_ptr<TokenSource> token;  // null: no Authorization header
  std::string description;             // for messages: "kubectl proxy at http://..."
};

struct ConnectionOptions {
  std::string proxy;   // kubectl proxy URL
  std::string server;  // API server URL
  std::string token_file;
  std::string certificate_authority;
  bool insecure_skip_tls_verify = false;
  std::string kubeconfig;
  std::string context;
  // In-cluster service account folder (token, ca.crt).
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

using Getenv = std::function<std::optional<std::string>(const std::string&)>;

// Chooses the connection: proxy if given; else --server; else the
// kubeconfig (given, or $HOME/.kube/config where it exists); else in-cluster
// (KUBERNETES_SERVICE_HOST/_PORT); else a clear error listing every place
// looked at.
absl::StatusOr<Connection> ResolveConnection(const ConnectionOptions& options, const Getenv& env);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_CONNECTION_H_
