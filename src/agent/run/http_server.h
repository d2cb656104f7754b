// A small HTTP/1.1 server for a few GET endpoints, bounded in memory,
// connections and time whatever its clients send: the metrics endpoint's
// transport. One I/O thread polls non-blocking sockets (it sleeps without a
// timeout while no connection has a deadline); each endpoint's handler runs
// on an EndpointWorker of its own, so a handler that blocks holds up no
// other endpoint and never the I/O thread.
//
// Bounds (Limits):
// - Requests: HttpRequestReader's caps on the request line and the head; a
//   body, another method or version is refused (see its header) and the
//   connection closed after the answer.
// - Connections: at most max_connections. At the cap a new connection
//   evicts an open one: one closing after its last answer first, then the
//   one idle longest, then the oldest still sending its head, then one
//   whose answer is not being read, and one waiting for its handler only
//   when every connection is; so a fresh probe always gets in. Accepted
//   until EAGAIN at each wake-up (at most four caps' worth, then the open
//   connections' turn).
// - Time: a whole request head within head_timeout of the accept or of the
//   previous answer (this is also the keep-alive idle timeout); an answer
//   written within write_timeout; after the last answer, the client's
//   remaining bytes are read and dropped for at most `linger` (and
//   max_linger_bytes) so that the answer is not lost to a reset.
// - Memory per connection: the request bytes (at most the head cap) and
//   one answer; pipelined requests are answered one after another, the
//   next read from the buffer once the previous answer is written.
#ifndef GPU_AGENT_AGENT_RUN_HTTP_SERVER_H_
#define GPU_AGENT_AGENT_RUN_HTTP_SERVER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/run/endpoint_worker.h"
#include "agent/run/http_request_reader.h"
#include "base/listen_address.h"

namespace gpu_agent {

class HttpServer {
 public:
  struct Limits {
    size_t max_connections = 128;
    // Handshakes the kernel completes before an accept. With 128, under a
    // storm of connects the queue overflowed now and then and a probe's
    // handshake waited for TCP's 1 s retransmission (bench/metrics_flood_bench:
    // /healthz max 1.04-1.06 s in 3 runs; 98-140 ms with 1024).
    int listen_backlog = 1024;
    std::chrono::milliseconds head_timeout{3000};
    std::chrono::milliseconds write_timeout{5000};
    std::chrono::milliseconds linger{1000};
    size_t max_linger_bytes = 64 * 1024;
    // Between the starts of two evaluations of one endpoint.
    std::chrono::milliseconds min_evaluation_interval{100};
    HttpRequestReader::Limits request;
  };

  // An endpoint: a GET (or HEAD) of `path` is answered by `handler`, run on
  // a thread named `thread_name` (at most 15 characters). Handlers must be
  // thread-safe.
  struct Route {
    std::string path;
    std::string thread_name;
    EndpointWorker::Handler handler;
  };

  // What the server has done since it started.
  struct Stats {
    uint64_t connections_accepted = 0;
    uint64_t connections_open = 0;
    uint64_t connections_evicted = 0;          // closed at the cap for a new one
    uint64_t connections_timed_out = 0;        // no whole head, or an answer not read, in time
    uint64_t requests_answered = 0;            // by a route or 404
    std::map<int, uint64_t> requests_refused;  // by status; 503: no thread to run it
    uint64_t buffered_bytes = 0;               // request bytes and unsent answers held now
    uint64_t peak_buffered_bytes = 0;
  };

  // Binds and listens (SO_REUSEADDR, never SO_REUSEPORT: a port in use is
  // an error); nothing is answered before Serve().
  static absl::StatusOr<std::unique_ptr<HttpServer>> Listen(const HostPort& where,
                                                            std::vector<Route> routes,
                                                            const Limits& limits);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Starts the I/O thread. Once only.
  void Serve();
  // Closes every connection and the listening socket and joins every
  // thread; returns once no handler runs any more. Idempotent.
  void Stop();
  int port() const { return port_; }
  // Thread-safe.
  Stats stats() const;

 private:
  struct Connection;
  struct Finished {
    size_t route;
    std::vector<uint64_t> waiters;
    EndpointAnswer answer;
  };
  // The statuses counted under requests_refused.
  static constexpr std::array<int, 7> kRefusals = {400, 405, 413, 414, 431, 503, 505};

  HttpServer(std::vector<Route> routes, const Limits& limits);
  void Loop();
  void AcceptAll(std::chrono::steady_clock::time_point now);
  void Evict(std::chrono::steady_clock::time_point now);
  void OnReadable(Connection& c, std::chrono::steady_clock::time_point now);
  void OnWritable(Connection& c, std::chrono::steady_clock::time_point now);
  // Reads the next request out of c's buffer and starts answering it,
  // when c is waiting for one and has written every answer.
  void Advance(Connection& c, std::chrono::steady_clock::time_point now);
  void Answer(Connection& c, int status, const std::string& content_type,
              std::shared_ptr<const std::string> body, bool allow,
              std::chrono::steady_clock::time_point now);
  void Flush(Connection& c, std::chrono::steady_clock::time_point now);
  void StartClosing(Connection& c, std::chrono::steady_clock::time_point now);
  void Close(uint64_t id);
  void TakeFinished(std::chrono::steady_clock::time_point now);
  void CountRefusal(int status);
  void UpdateBuffered();
  void NotePressure(std::chrono::steady_clock::time_point now);

  // Constant after construction.
  const std::vector<Route> routes_;
  const Limits limits_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop() and finished evaluations
  int port_ = 0;

  std::vector<std::unique_ptr<EndpointWorker>> workers_;  // one per route
  std::thread io_thread_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;  // Stop() has run; Stop()'s caller only

  std::mutex finished_mu_;
  std::vector<Finished> finished_;  // protected by finished_mu_

  // The I/O thread's alone.
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;
  uint64_t next_id_ = 1;
  std::chrono::steady_clock::time_point accept_paused_until_;
  std::chrono::steady_clock::time_point last_pressure_log_;
  uint64_t logged_evicted_ = 0, logged_timed_out_ = 0, logged_refused_ = 0;

  // Written by the I/O thread, read by stats().
  std::atomic<uint64_t> accepted_{0}, evicted_{0}, timed_out_{0}, answered_{0}, open_{0};
  std::array<std::atomic<uint64_t>, kRefusals.size()> refused_{};
  std::atomic<uint64_t> buffered_{0}, peak_buffered_{0};
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_HTTP_SERVER_H_
