#include "apiserver/connection.h"

#include <unistd.h>

#include "apiserver/exec_credential.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

// A bearer token is a few KiB at most (a projected service-account JWT).
constexpr size_t kMaxTokenFileBytes = 64u << 10;

// Said once for each connection resolved: an operator who turned the
// check off (or a kubeconfig that did) must see what it costs.
void WarnIfUnverified(const Connection& c) {
  if (!c.insecure_skip_verify || c.endpoint.scheme != "https") return;
  LogWarning(
      "TLS verification of the API server is off (insecure-skip-tls-verify): anyone between the "
      "agent and the server can read its credentials and answer in the server's place",
      {{"server", c.description}});
}

}  // namespace

std::string Endpoint::Url() const {
  const bool v6 = host.find(':') != std::string::npos;
  return StrCat(scheme, "://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port, path_prefix);
}

absl::StatusOr<Endpoint> ParseServerUrl(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("invalid API server URL \"", url, "\": ", why));
  };
  Endpoint e;
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return bad("missing scheme (use https:// or http://)");
  e.scheme = AsciiToLower(url.substr(0, sep));
  if (e.scheme != "http" && e.scheme != "https") return bad("scheme must be http or https");
  std::string_view rest = url.substr(sep + 3);
  const size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    e.path_prefix = std::string(path);
  }
  if (hostport.find('@') != std::string_view::npos)
    return bad("credentials in URLs are not supported");
  if (!hostport.empty() && hostport.front() == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in IPv6 address");
    e.host = std::string(hostport.substr(1, close - 1));
    hostport.remove_prefix(close + 1);
    if (!hostport.empty() && hostport.front() != ':') return bad("unexpected text after ']'");
    if (!hostport.empty()) hostport.remove_prefix(1);
  } else {
    const size_t colon = hostport.rfind(':');
    e.host = std::string(hostport.substr(0, colon));
    hostport = colon == std::string_view::npos ? std::string_view() : hostport.substr(colon + 1);
  }
  if (e.host.empty()) return bad("no host");
  for (char c : e.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
          c == '%')) {
      return bad(StrCat("invalid character '", std::string(1, c), "' in host"));
    }
  }
  if (hostport.empty()) {
    e.port = e.scheme == "https" ? 443 : 80;
  } else if (!ParseInt(hostport, &e.port) || e.port <= 0 || e.port > 65535) {
    return bad(StrCat("invalid port \"", hostport, "\""));
  }
  return e;
}

std::shared_ptr<TokenSource> TokenSource::Fixed(std::string token) {
  auto t = std::make_shared<TokenSource>();
  t->token_ = std::move(token);
  t->valid_ = true;
  return t;
}

std::shared_ptr<TokenSource> TokenSource::FromFile(std::string path, std::chrono::seconds refresh) {
  auto t = std::make_shared<TokenSource>();
  t->path_ = std::move(path);
  t->refresh_ = refresh;
  return t;
}

std::shared_ptr<TokenSource> TokenSource::FromExec(ExecConfig exec) {
  auto t = std::make_shared<TokenSource>();
  t->exec_ = std::move(exec);
  return t;
}

absl::StatusOr<std::string> TokenSource::Token() {
  std::lock_guard<std::mutex> lock(mu_);
  if (exec_) {
    const auto now = std::chrono::system_clock::now();
    if (valid_ && (!expires_ || now + std::chrono::seconds(10) < *expires_)) return token_;
    absl::StatusOr<ExecCredential> cred = RunExecPlugin(*exec_);
    if (!cred.ok()) return cred.status();
    token_ = cred->token;
    expires_ = cred->expires;
    valid_ = true;
    return token_;
  }
  if (path_.empty()) return token_;
  const auto now = std::chrono::steady_clock::now();
  if (valid_ && now - read_at_ < refresh_) return token_;
  // A projected token is a link into the volume's current data: followed.
  // A FIFO or /dev/zero named by mistake is refused, not read without end.
  absl::StatusOr<std::string> text = ReadFileBounded(path_, kMaxTokenFileBytes);
  if (!text.ok()) {
    return absl::FailedPreconditionError(StrCat("token file: ", text.status().message()));
  }
  std::string token(StripWhitespace(*text));
  if (token.empty()) {
    return absl::FailedPreconditionError(StrCat("token file \"", path_, "\" is empty"));
  }
  if (absl::Status bad = CheckBearerToken(token); !bad.ok()) {
    return absl::FailedPreconditionError(StrCat("token file \"", path_, "\": ", bad.message()));
  }
  token_ = std::move(token);
  read_at_ = now;
  valid_ = true;
  return token_;
}

void TokenSource::Invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!path_.empty() || exec_) valid_ = false;
}

absl::StatusOr<Connection> ResolveConnection(const ConnectionOptions& o, const Getenv& env) {
  Connection c;
  if (!o.proxy.empty()) {
    absl::StatusOr<Endpoint> e = ParseServerUrl(o.proxy);
    if (!e.ok()) return e.status();
    if (e->scheme != "http") {
      return absl::InvalidArgumentError(
          StrCat("proxy URL \"", o.proxy, "\": kubectl proxy serves plain http"));
    }
    c.endpoint = *e;
    c.description = StrCat("kubectl proxy at ", c.endpoint.Url());
    return c;
  }
  // As kubectl finds its kubeconfig: --kubeconfig, then KUBECONFIG (both
  // arrive as o.kubeconfig), then ~/.kube/config where it exists, then the
  // in-cluster service account.
  std::string kubeconfig = o.kubeconfig;
  std::string home_config;
  if (const auto home = env("HOME"); home && !home->empty()) {
    home_config = StrCat(*home, "/.kube/config");
  }
  if (kubeconfig.empty() && o.server.empty() && !home_config.empty() &&
      ::access(home_config.c_str(), F_OK) == 0) {
    kubeconfig = home_config;
  }
  if (!kubeconfig.empty() && o.server.empty()) {
    absl::StatusOr<KubeconfigSelection> kc = LoadKubeconfig(kubeconfig, o.context);
    if (!kc.ok()) return kc.status();
    absl::StatusOr<Endpoint> e = ParseServerUrl(kc->server);
    if (!e.ok()) return e.status();
    c.endpoint = *e;
    c.description =
        StrCat("API server ", c.endpoint.Url(), " (kubeconfig context \"", kc->context, "\")");
    c.ca_file = o.certificate_authority.empty() ? kc->ca_file : o.certificate_authority;
    c.ca_pem = o.certificate_authority.empty() ? kc->ca_pem : "";
    c.insecure_skip_verify = o.insecure_skip_tls_verify || kc->insecure_skip_tls_verify;
    c.tls_server_name = kc->tls_server_name;
    c.client_cert_file = kc->client_cert_file;
    c.client_key_file = kc->client_key_file;
    c.client_cert_pem = kc->client_cert_pem;
    c.client_key_pem = kc->client_key_pem;
    if (!o.token_file.empty()) {
      c.token = TokenSource::FromFile(o.token_file);
    } else if (!kc->token.empty()) {
      c.token = TokenSource::Fixed(kc->token);
    } else if (!kc->token_file.empty()) {
      c.token = TokenSource::FromFile(kc->token_file);
    } else if (kc->exec) {
      c.token = TokenSource::FromExec(*kc->exec);
    }
    WarnIfUnverified(c);
    return c;
  }
  std::string server = o.server;
  std::string token_file = o.token_file;
  std::string ca = o.certificate_authority;
  if (server.empty()) {
    const auto host = env("KUBERNETES_SERVICE_HOST");
    const auto port = env("KUBERNETES_SERVICE_PORT");
    if (!host || host->empty()) {
      return absl::FailedPreconditionError(StrCat(
          "no API server to talk to; looked, as kubectl does, at: --kubeconfig (not given), "
          "KUBECONFIG (unset), ",
          home_config.empty() ? std::string("~/.kube/config (HOME is unset)")
                              : StrCat(home_config, " (not there)"),
          ", in-cluster (KUBERNETES_SERVICE_HOST is unset: not in a pod); or give --server or "
          "--proxy"));
    }
    const bool v6 = host->find(':') != std::string::npos;
    server = StrCat("https://", v6 ? "[" : "", *host, v6 ? "]" : "", ":",
                    port && !port->empty() ? *port : "443");
    if (token_file.empty()) token_file = o.service_account_dir + "/token";
    if (ca.empty()) ca = o.service_account_dir + "/ca.crt";
    c.description = StrCat("in-cluster API server ", server);
  }
  absl::StatusOr<Endpoint> e = ParseServerUrl(server);
  if (!e.ok()) return e.status();
  c.endpoint = *e;
  if (c.description.empty()) c.description = StrCat("API server ", c.endpoint.Url());
  c.ca_file = ca;
  c.insecure_skip_verify = o.insecure_skip_tls_verify;
  if (!token_file.empty()) c.token = TokenSource::FromFile(token_file);
  WarnIfUnverified(c);
  return c;
}

}  // namespace gpu_agent::apiserver
