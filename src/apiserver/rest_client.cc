#include "apiserver/rest_client.h"

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "cpp-httplib must be compiled with CPPHTTPLIB_OPENSSL_SUPPORT (use PkgConfig::HTTPLIB)"
#endif
#include <fcntl.h>
#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>

#include "base/duration.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

// A bundle of every public CA is about 200 KiB.
constexpr off_t kMaxCaFileBytes = 4 << 20;

std::string TransportError(const Connection& c, httplib::Error err, long verify_result) {
  using E = httplib::Error;
  const std::string who = c.description;
  switch (err) {
    case E::Connection:
      return StrCat("cannot connect to ", who, " (connection refused or host unreachable)");
    case E::ConnectionTimeout:
      return StrCat("timed out connecting to ", who);
    case E::Read:
      return StrCat(who, " did not answer in time, or closed the connection mid-answer");
    case E::Write:
      return StrCat("the connection to ", who, " broke while sending");
    case E::SSLConnection:
      return StrCat("TLS handshake with ", who, " failed (is it really https?)");
    case E::SSLServerVerification:
      return StrCat("TLS: the certificate of ", who,
                    " is not trusted or does not match the host name (OpenSSL verify result ",
                    verify_result, ": ", X509_verify_cert_error_string(verify_result),
                    "); check --certificate-authority, or the server name");
    case E::SSLLoadingCerts:
      return StrCat("TLS: cannot load the CA file \"", c.ca_file, "\"");
    case E::Canceled:
      return StrCat("the answer from ", who, " was larger than allowed and was cut off");
    case E::ExceedRedirectCount:
      return StrCat(who, " redirected too many times");
    default:
      return StrCat("request to ", who, " failed: ", httplib::to_string(err));
  }
}

// User-Agent, Accept and, with a token source, Authorization.
absl::StatusOr<httplib::Headers> RequestHeaders(const Connection& c, const RestOptions& o) {
  httplib::Headers headers = {{"User-Agent", o.user_agent}, {"Accept", "application/json"}};
  if (c.token) {
    absl::StatusOr<std::string> token = c.token->Token();
    if (!token.ok()) return token.status();
    headers.emplace("Authorization", "Bearer " + *token);
  }
  return headers;
}

// Retry-After as delta-seconds (what kube-apiserver sends); the HTTP-date
// form, garbage and absurd values read as none.
int RetryAfterSeconds(const httplib::Response& res) {
  const std::string v = res.get_header_value("Retry-After");
  if (v.empty() || v.size() > 9) return -1;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoi(v);
}

// Makes a socket that is about to connect fail to: the descriptor now
// names /dev/null (the number stays httplib's to close), so connect()
// answers ENOTSOCK and nothing reaches the network.
void SpoilSocket(int fd) {
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) {
    ::shutdown(fd, SHUT_RDWR);  // the fallback: the connection ends on its first read
    return;
  }
  ::dup3(null_fd, fd, O_CLOEXEC);
  ::close(null_fd);
}

}  // namespace

RestClient::RestClient(Connection c, RestOptions o, std::unique_ptr<httplib::Client> client)
    : connection_(std::move(c)), options_(std::move(o)), client_(std::move(client)) {
  // httplib opens a connection (and calls this) under the lock that stop()
  // takes, and marks the request in flight under it: a Cancel either finds
  // the request in flight (stop() shuts its socket) or comes before its
  // connection (spoiled here). Nothing in between.
  client_->set_socket_options([this](int fd) {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    if (cancelled_) SpoilSocket(fd);
  });
}

RestClient::~RestClient() = default;

absl::StatusOr<std::unique_ptr<RestClient>> RestClient::Create(Connection c, RestOptions o) {
  const Endpoint& e = c.endpoint;
  // With tls-server-name, connect to the real host but check (and send SNI
  // for) the configured name.
  const std::string& name = c.tls_server_name.empty() ? e.host : c.tls_server_name;
  const std::string base = StrCat(
      e.scheme, "://", name.find(':') != std::string::npos ? "[" + name + "]" : name, ":", e.port);
  // Client certificates: httplib loads them from files when the client is
  // made, so the -data forms go through private temp files removed at once.
  std::string cert_file = c.client_cert_file, key_file = c.client_key_file;
  std::vector<std::string> temps;
  auto temp_with = [&](const std::string& pem) -> std::string {
    char path[] = "/tmp/gpu-agent-cred.XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) return "";
    const bool ok = ::write(fd, pem.data(), pem.size()) == static_cast<ssize_t>(pem.size());
    ::close(fd);
    temps.push_back(path);
    return ok ? std::string(path) : "";
  };
  if (!c.client_cert_pem.empty()) cert_file = temp_with(c.client_cert_pem);
  if (!c.client_key_pem.empty()) key_file = temp_with(c.client_key_pem);
  auto client = cert_file.empty() ? std::make_unique<httplib::Client>(base)
                                  : std::make_unique<httplib::Client>(base, cert_file, key_file);
  for (const std::string& t : temps) ::unlink(t.c_str());
  if (!c.tls_server_name.empty()) client->set_hostname_addr_map({{c.tls_server_name, e.host}});
  if (!client->is_valid()) {
    return absl::InvalidArgumentError(StrCat("cannot use API server address ", base));
  }
  if (e.scheme == "https") {
    if (c.insecure_skip_verify) {
      client->enable_server_certificate_verification(false);
    } else {
      client->enable_server_certificate_verification(true);
      if (!c.ca_file.empty()) {
        // OpenSSL reads it itself: checked first to be a regular file of
        // bounded size (not a FIFO, nor /dev/zero).
        struct stat st;
        if (::stat(c.ca_file.c_str(), &st) != 0) {
          return absl::FailedPreconditionError(
              StrCat("certificate authority file \"", c.ca_file, "\" does not exist"));
        }
        if (!S_ISREG(st.st_mode) || st.st_size > kMaxCaFileBytes) {
          return absl::FailedPreconditionError(StrCat("certificate authority file \"", c.ca_file,
                                                      "\" is not a regular file of at most ",
                                                      kMaxCaFileBytes, " bytes"));
        }
        client->set_ca_cert_path(c.ca_file);
      } else if (!c.ca_pem.empty()) {
        X509_STORE* store = X509_STORE_new();
        BIO* bio = BIO_new_mem_buf(c.ca_pem.data(), static_cast<int>(c.ca_pem.size()));
        int added = 0;
        while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
          added += X509_STORE_add_cert(store, cert) == 1;
          X509_free(cert);
        }
        BIO_free(bio);
        ERR_clear_error();
        if (added == 0) {
          X509_STORE_free(store);
          return absl::InvalidArgumentError("certificate-authority-data holds no PEM certificate");
        }
        client->set_ca_cert_store(store);  // the client owns it from here
      }
    }
  }
  client->set_connection_timeout(
      std::chrono::duration_cast<std::chrono::microseconds>(o.connect_timeout));
  client->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(o.read_timeout));
  client->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(o.read_timeout));
  client->set_keep_alive(true);
  // A request goes out as headers then body: without this, Nagle's algorithm
  // holds the body until the server's delayed ACK, 40 ms a request.
  client->set_tcp_nodelay(true);
  client->set_follow_location(false);
  return std::unique_ptr<RestClient>(new RestClient(std::move(c), std::move(o), std::move(client)));
}

absl::StatusOr<HttpResponse> RestClient::Send(const std::string& method, const std::string& path,
                                              const std::string& body,
                                              const std::string& content_type, bool repeatable) {
  const std::string full = connection_.endpoint.path_prefix + path;
  bool token_reread = false, resent = false;
  for (;;) {
    if (cancelled()) return CancelledError();
    absl::StatusOr<httplib::Headers> headers = RequestHeaders(connection_, options_);
    if (!headers.ok()) return headers.status();
    // Every answer's body goes through the cap as it arrives, whatever the
    // method: a server that answers a PATCH with gigabytes is cut off at
    // max_body_bytes, not buffered whole first.
    std::string received;
    bool too_big = false;
    httplib::Request req;
    req.method = method;
    req.path = full;
    req.headers = std::move(*headers);
    if (!content_type.empty()) req.headers.emplace("Content-Type", content_type);
    req.body = body;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (received.size() + n > options_.max_body_bytes) {
        too_big = true;
        return false;
      }
      received.append(data, n);
      return true;
    };
    const auto started = std::chrono::steady_clock::now();
    httplib::Result res = client_->send(req);
    if (too_big) {
      return absl::ResourceExhaustedError(StrCat("the answer from ", connection_.description,
                                                 " to ", method, " ", path, " is over ",
                                                 options_.max_body_bytes, " bytes; refused"));
    }
    if (!res && cancelled()) return CancelledError();
    if (!res) {
      // Cut off well before the read timeout: the connection was closed, not
      // slow. httplib has closed it; the next request opens a new one.
      const bool cut_off =
          (res.error() == httplib::Error::Read || res.error() == httplib::Error::Write) &&
          std::chrono::steady_clock::now() - started < options_.read_timeout / 2;
      if (cut_off && repeatable && !resent) {
        resent = true;
        ++resent_;
        continue;
      }
      CountError(0);
      return absl::UnavailableError(
          TransportError(connection_, res.error(), client_->get_openssl_verify_result()));
    }
    if (res->status >= 400) CountError(res->status);
    HttpResponse out;
    out.status = res->status;
    out.retry_after_s = RetryAfterSeconds(*res);
    out.body = std::move(received);
    // A projected token may have rotated: read it again, once.
    if (out.status == 401 && !token_reread && connection_.token &&
        connection_.token->rereadable()) {
      token_reread = true;
      connection_.token->Invalidate();
      continue;
    }
    return out;
  }
}

absl::StatusOr<HttpResponse> RestClient::Post(const std::string& path, const std::string& body,
                                              const std::string& content_type, bool repeatable) {
  return Send("POST", path, body, content_type, repeatable);
}

absl::StatusOr<HttpResponse> RestClient::Get(const std::string& path) {
  return Send("GET", path, "", "", /*repeatable=*/true);
}

absl::StatusOr<HttpResponse> RestClient::Patch(const std::string& path, const std::string& body,
                                               const std::string& content_type, bool repeatable) {
  return Send("PATCH", path, body, content_type, repeatable);
}

absl::StatusOr<HttpResponse> RestClient::Put(const std::string& path, const std::string& body) {
  // A PUT names the resourceVersion it replaces: sent twice, the second
  // answers 409, never a second change.
  return Send("PUT", path, body, "application/json", /*repeatable=*/true);
}

absl::StatusOr<HttpResponse> RestClient::Delete(const std::string& path) {
  return Send("DELETE", path, "", "", /*repeatable=*/true);
}

absl::StatusOr<int> RestClient::Stream(const std::string& path, std::chrono::seconds within,
                                       const std::function<bool(std::string_view)>& on_chunk,
                                       int* retry_after_s) {
  if (retry_after_s) *retry_after_s = -1;
  if (cancelled()) return CancelledError();
  absl::StatusOr<httplib::Headers> headers = RequestHeaders(connection_, options_);
  if (!headers.ok()) return headers.status();
  // The read timeout bounds a silent server; this bounds one that keeps
  // sending (a byte now and then) past the time it was asked to end.
  const auto deadline = std::chrono::steady_clock::now() + within + options_.stream_grace;
  bool stopped = false, overran = false;
  httplib::Result res = client_->Get(connection_.endpoint.path_prefix + path, *headers,
                                     [&](const char* data, size_t n) {
                                       if (std::chrono::steady_clock::now() > deadline) {
                                         overran = true;
                                         return false;
                                       }
                                       if (!on_chunk(std::string_view(data, n))) {
                                         stopped = true;
                                         return false;
                                       }
                                       return true;
                                     });
  if (overran) {
    CountError(0);
    return absl::DeadlineExceededError(
        StrCat(connection_.description, " kept the watch open past the ", within.count(),
               " s it was asked for (and ", FormatDuration(options_.stream_grace),
               " more); the agent closed it"));
  }
  if (stopped) return res ? res->status : 200;
  if (!res && cancelled()) return CancelledError();
  if (!res) {
    return absl::UnavailableError(
        TransportError(connection_, res.error(), client_->get_openssl_verify_result()));
  }
  if (res->status == 401 && connection_.token) connection_.token->Invalidate();
  if (retry_after_s) *retry_after_s = RetryAfterSeconds(*res);
  return res->status;
}

void RestClient::Cancel() {
  {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    cancelled_ = true;
  }
  client_->stop();
}

void RestClient::Resume() {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  cancelled_ = false;
}

bool RestClient::cancelled() const {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  return cancelled_;
}

absl::Status RestClient::CancelledError() const {
  return absl::CancelledError(StrCat("the request to ", connection_.description, " was cancelled"));
}

std::string EscapePathSegment(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  // "." and ".." are the folder's names even unescaped: encoded, they are
  // names like any other.
  if (out == ".") return "%2E";
  if (out == "..") return "%2E%2E";
  return out;
}

void RestClient::CountError(int code) {
  std::lock_guard<std::mutex> lock(errors_mu_);
  ++errors_[code];
}

std::map<int, uint64_t> RestClient::ErrorCounts() const {
  std::lock_guard<std::mutex> lock(errors_mu_);
  return errors_;
}

std::string RestClient::Describe(const std::string& method, const std::string& path,
                                 const std::string& body, const std::string& content_type) const {
  std::string out = StrCat(method, " ", connection_.endpoint.Url(), path, "\n");
  if (connection_.token) StrAppend(&out, "Authorization: Bearer <redacted>\n");
  if (!content_type.empty()) StrAppend(&out, "Content-Type: ", content_type, "\n");
  StrAppend(&out, "User-Agent: ", options_.user_agent, "\n");
  if (!body.empty()) StrAppend(&out, "\n", body, "\n");
  return out;
}

}  // namespace gpu_agent::apiserver
