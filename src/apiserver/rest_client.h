// HTTP(S) to the API server on cpp-httplib and OpenSSL: TLS verified unless
// the user turned it off, connect and read timeouts, User-Agent, bodies
// capped in size, one re-read of the token after a 401. Never logs secrets.
#ifndef GPU_AGENT_APISERVER_REST_CLIENT_H_
#define GPU_AGENT_APISERVER_REST_CLIENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"

namespace httplib {
class Client;
}

namespace gpu_agent::apiserver {

struct HttpResponse {
  int status = 0;
  std::string body;
  // The Retry-After header in seconds (a 429 or 5xx may bring one); -1: none
  // or not a number of seconds.
  int retry_after_s = -1;
};

struct RestOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{30000};
  size_t max_body_bytes = 8u << 20;
  // How long a watch may still send past the timeoutSeconds it asked for
  // before the client ends it (Stream).
  std::chrono::milliseconds stream_grace{30000};
  std::string user_agent = "gpu-agent";
};

class RestClient {
 public:
  static absl::StatusOr<std::unique_ptr<RestClient>> Create(Connection connection,
                                                            RestOptions options);
  ~RestClient();

  // A transport failure (cannot connect, TLS, timeout, body too large) is an
  // error status naming the server; any HTTP answer is an HttpResponse.
  //
  // A request the server cut off unanswered (a kept-alive connection that a
  // restarted server no longer has) is sent once more, at once, on a new
  // connection: always for a GET, for a PATCH only when `repeatable` (see
  // JsonPatch::guarded). A timeout is not retried.
  absl::StatusOr<HttpResponse> Get(const std::string& path);
  absl::StatusOr<HttpResponse> Patch(const std::string& path, const std::string& body,
                                     const std::string& content_type, bool repeatable = false);
  // JSON bodies unless said otherwise. A POST (creating an object) cut off
  // unanswered is sent again only when `repeatable` (a duplicate does no
  // harm); a PUT (which names a resourceVersion) and a DELETE are.
  absl::StatusOr<HttpResponse> Post(const std::string& path, const std::string& body,
                                    const std::string& content_type = "application/json",
                                    bool repeatable = false);
  absl::StatusOr<HttpResponse> Put(const std::string& path, const std::string& body);
  absl::StatusOr<HttpResponse> Delete(const std::string& path);
  // Streams the body of a long GET (a watch the server was asked to end
  // `within`, its timeoutSeconds), calling `on_chunk` with raw bytes as they
  // arrive; `on_chunk` returns false to stop. Returns the HTTP status seen;
  // with `retry_after_s`, sets it as HttpResponse::retry_after_s. A stream
  // still sending stream_grace after `within` is cut off: DeadlineExceeded.
  absl::StatusOr<int> Stream(const std::string& path, std::chrono::seconds within,
                             const std::function<bool(std::string_view)>& on_chunk,
                             int* retry_after_s = nullptr);

  // The request as it would be sent, Authorization redacted: for --dry-run.
  std::string Describe(const std::string& method, const std::string& path, const std::string& body,
                       const std::string& content_type) const;

  // Answers with status >= 400 by code, and transport failures under 0.
  std::map<int, uint64_t> ErrorCounts() const;
  // Requests sent again on a new connection after one was cut off.
  uint64_t resent() const { return resent_.load(); }

  // From another thread: ends the request in progress, and makes every
  // later one fail at once (kCancelled) until Resume(). A request that is
  // just starting (between its caller's last look at a stop flag and its
  // connection) is ended as promptly: whether its socket is new or kept
  // alive, it cannot slip past a Cancel. Cheap when nothing is in flight.
  void Cancel();
  // Requests are sent again (after a Cancel that ended one watch, say).
  void Resume();
  bool cancelled() const;

  const Connection& connection() const { return connection_; }

 private:
  RestClient(Connection c, RestOptions o, std::unique_ptr<httplib::Client> client);
  absl::StatusOr<HttpResponse> Send(const std::string& method, const std::string& path,
                                    const std::string& body, const std::string& content_type,
                                    bool repeatable);

  const Connection connection_;
  const RestOptions options_;
  std::unique_ptr<httplib::Client> client_;
  void CountError(int code);
  // The error of a request cancelled before or while it ran.
  absl::Status CancelledError() const;
  // Taken by Cancel, and by httplib while it holds its socket lock to
  // open a connection: a connection opened after a Cancel fails at once.
  mutable std::mutex cancel_mu_;
  bool cancelled_ = false;  // protected by cancel_mu_
  mutable std::mutex errors_mu_;
  std::map<int, uint64_t> errors_;  // protected by errors_mu_
  std::atomic<uint64_t> resent_{0};
};

// `s` as one segment of a URL path (or a query value): every byte but
// letters, digits and "-._~" percent-encoded, so a name from outside
// ("../../api/v1/secrets") stays one segment. Every part of a URL built from
// outside data goes through it.
std::string EscapePathSegment(std::string_view s);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_REST_CLIENT_H_
