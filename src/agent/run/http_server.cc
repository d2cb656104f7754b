#include "agent/run/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "agent/run/http_connection.h"
#include "base/log.h"
#include "base/poll_driven.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent {
namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// After accept fails for want of descriptors or memory with no connection
// of ours to close, the listening socket is left alone this long (it stays
// readable, and polling it again at once would spin).
constexpr std::chrono::milliseconds kAcceptPause{100};
// Between two log lines about evicted, timed-out or refused connections.
constexpr std::chrono::seconds kPressureLogInterval{60};

}  // namespace

HttpServer::HttpServer(std::vector<Route> routes, const Limits& limits)
    : routes_(std::move(routes)), limits_(limits) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Listen(const HostPort& where,
                                                               std::vector<Route> routes,
                                                               const Limits& limits) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(routes), limits));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = StrCat(where.port);
  if (const int rc = ::getaddrinfo(where.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::FailedPreconditionError(StrCat("cannot resolve the host: ", ::gai_strerror(rc)));
  }
  int err = 0;
  for (const addrinfo* ai = found; ai != nullptr && s->listen_fd_ < 0; ai = ai->ai_next) {
    const int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // Not SO_REUSEPORT: that would let a second process share the port.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, limits.listen_backlog) != 0) {
      err = errno;
      ::close(fd);
      continue;
    }
    s->listen_fd_ = fd;
  }
  ::freeaddrinfo(found);
  if (s->listen_fd_ < 0) return absl::FailedPreconditionError(std::strerror(err));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  s->port_ =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  s->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake_fd_ < 0)
    return absl::ResourceExhaustedError(StrCat("eventfd: ", std::strerror(errno)));
  HttpServer* self = s.get();
  for (size_t i = 0; i < s->routes_.size(); ++i) {
    s->workers_.push_back(std::make_unique<EndpointWorker>(
        s->routes_[i].thread_name, limits.min_evaluation_interval, s->routes_[i].handler,
        [self, i](std::vector<uint64_t> waiters, EndpointAnswer answer) {
          {
            std::lock_guard<std::mutex> lock(self->finished_mu_);
            self->finished_.push_back({i, std::move(waiters), std::move(answer)});
          }
          const uint64_t one = 1;
          (void)!::write(self->wake_fd_, &one, sizeof one);
        }));
  }
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Serve() {
  io_thread_ = std::thread([this] {
    NameThisThread("metrics");
    Loop();
  });
}

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  if (io_thread_.joinable()) io_thread_.join();
  for (auto& w : workers_) w->Stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

HttpServer::Stats HttpServer::stats() const {
  Stats s;
  s.connections_accepted = accepted_.load(std::memory_order_relaxed);
  s.connections_open = open_.load(std::memory_order_relaxed);
  s.connections_evicted = evicted_.load(std::memory_order_relaxed);
  s.connections_timed_out = timed_out_.load(std::memory_order_relaxed);
  s.requests_answered = answered_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kRefusals.size(); ++i) {
    s.requests_refused[kRefusals[i]] = refused_[i].load(std::memory_order_relaxed);
  }
  s.buffered_bytes = buffered_.load(std::memory_order_relaxed);
  s.peak_buffered_bytes = peak_buffered_.load(std::memory_order_relaxed);
  return s;
}

void HttpServer::CountRefusal(int status) {
  for (size_t i = 0; i < kRefusals.size(); ++i) {
    if (kRefusals[i] == status) refused_[i].fetch_add(1, std::memory_order_relaxed);
  }
}

void HttpServer::Loop() {
  std::vector<pollfd> fds;
  std::vector<Connection*> polled;
  while (!stopping_.load()) {
    TimePoint now = Clock::now();
    TimePoint next = TimePoint::max();
    for (auto& [id, conn] : connections_) {
      Connection& c = *conn;
      if (c.dead) continue;
      TimePoint due = TimePoint::max();
      switch (c.state) {
        case Connection::State::kReading:
          due = c.since + limits_.head_timeout;
          break;
        case Connection::State::kWriting:
          due = c.since + limits_.write_timeout;
          break;
        case Connection::State::kClosing:
          due = c.since + limits_.linger;
          break;
        case Connection::State::kHandling:
          break;
      }
      if (due > now) {
        next = std::min(next, due);
        continue;
      }
      // An idle keep-alive connection ending is no sign of trouble; a head
      // begun and not finished, or an answer not read, is.
      const bool stalled =
          c.state == Connection::State::kWriting ||
          (c.state == Connection::State::kReading && (c.reader.buffered() > 0 || !c.answered_once));
      if (stalled) timed_out_.fetch_add(1, std::memory_order_relaxed);
      Close(c.id);
    }
    for (auto it = connections_.begin(); it != connections_.end();) {
      it = it->second->dead ? connections_.erase(it) : std::next(it);
    }
    UpdateBuffered();
    NotePressure(now);

    fds.clear();
    polled.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_paused_until_;
    if (!accepting) next = std::min(next, accept_paused_until_);
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (auto& [id, conn] : connections_) {
      short events = 0;
      switch (conn->state) {
        case Connection::State::kReading:
        case Connection::State::kClosing:
          events = POLLIN;
          break;
        case Connection::State::kWriting:
          events = POLLOUT;
          break;
        case Connection::State::kHandling:
          break;  // errors only
      }
      fds.push_back({conn->fd, events, 0});
      polled.push_back(conn.get());
    }
    const int n = ::poll(fds.data(), fds.size(), PollTimeoutMs(next));
    if (n < 0) {
      if (errno == EINTR) continue;
      // Out of kernel memory for the poll set: wait a little and go on.
      LogWarning("metrics endpoint: poll failed", {{"error", std::strerror(errno)}});
      accept_paused_until_ = Clock::now() + kAcceptPause;
      continue;
    }
    now = Clock::now();
    if (fds[0].revents != 0) {
      uint64_t count;
      (void)!::read(wake_fd_, &count, sizeof count);
      if (stopping_.load()) break;
      TakeFinished(now);
    }
    // Requests already here are read before new connections can evict
    // anything.
    for (size_t i = 0; i < polled.size(); ++i) {
      Connection& c = *polled[i];
      const short revents = fds[i + 2].revents;
      if (c.dead || revents == 0) continue;
      if ((revents & POLLIN) != 0) OnReadable(c, now);
      if (!c.dead && (revents & POLLOUT) != 0) OnWritable(c, now);
      if (!c.dead && (revents & (POLLERR | POLLHUP | POLLNVAL)) != 0 && (revents & POLLIN) == 0) {
        Close(c.id);
      }
    }
    if ((fds[1].revents & POLLIN) != 0) AcceptAll(now);
  }
  for (auto& [id, conn] : connections_) {
    if (!conn->dead) ::close(conn->fd);
  }
  connections_.clear();
  open_.store(0, std::memory_order_relaxed);
  buffered_.store(0, std::memory_order_relaxed);
}

void HttpServer::AcceptAll(TimePoint now) {
  // Until EAGAIN, but not without end under a storm of connects: past a few
  // caps' worth in one turn each one would only evict one of this turn's.
  // The listening socket stays readable, so the next turn (after the open
  // connections have been served) takes the rest.
  for (size_t taken = 0; taken < 4 * limits_.max_connections; ++taken) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if ((err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) &&
          open_.load(std::memory_order_relaxed) > 0) {
        Evict(now);  // frees a descriptor; each turn closes one, so this ends
        continue;
      }
      LogWarning("metrics endpoint: cannot accept connections for now",
                 {{"error", std::strerror(err)}});
      accept_paused_until_ = now + kAcceptPause;
      return;
    }
    if (open_.load(std::memory_order_relaxed) >= limits_.max_connections) Evict(now);
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    const uint64_t id = next_id_++;
    auto conn = std::make_unique<Connection>(id, fd, limits_.request, now);
    Connection& c = *conn;
    connections_.emplace(id, std::move(conn));
    accepted_.fetch_add(1, std::memory_order_relaxed);
    open_.fetch_add(1, std::memory_order_relaxed);
    // A client sends its request right after connecting: it is often here
    // already, and a connection with a request is the last to be evicted.
    OnReadable(c, now);
  }
}

void HttpServer::Evict(TimePoint now) {
  // Cheapest to lose first: a connection closing, then one idle, then one
  // still sending its head, then one whose answer is not being read, and
  // last one waiting for its handler; within a class, the oldest. Among
  // those waiting for a handler, one of the endpoint with the most waiting:
  // a flood of complete /metrics requests never evicts a probe waiting for
  // /healthz (each endpoint its own budget, in effect).
  std::vector<size_t> waiting(routes_.size(), 0);
  for (const auto& [id, conn] : connections_) {
    if (!conn->dead && conn->state == Connection::State::kHandling &&
        conn->route < waiting.size()) {
      ++waiting[conn->route];
    }
  }
  auto crowd = [&](const Connection& c) {
    return c.route < waiting.size() ? waiting[c.route] : size_t{0};
  };
  auto rank = [](const Connection& c) {
    switch (c.state) {
      case Connection::State::kClosing:
        return 0;
      case Connection::State::kReading:
        return c.reader.buffered() == 0 ? 1 : 2;
      case Connection::State::kWriting:
        return 3;
      case Connection::State::kHandling:
        return 4;
    }
    return 4;
  };
  Connection* victim = nullptr;
  for (auto& [id, conn] : connections_) {
    Connection& c = *conn;
    if (c.dead) continue;
    const bool before = victim == nullptr || rank(c) < rank(*victim) ||
                        (rank(c) == rank(*victim) &&
                         (c.state == Connection::State::kHandling && crowd(c) != crowd(*victim)
                              ? crowd(c) > crowd(*victim)
                              : c.since < victim->since));
    if (before) victim = &c;
  }
  if (victim == nullptr) return;
  if (victim->state != Connection::State::kClosing) {
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
  Close(victim->id);
  NotePressure(now);
}

void HttpServer::Close(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second->dead) return;
  Connection& c = *it->second;
  ::close(c.fd);
  c.fd = -1;
  c.dead = true;
  c.body.reset();
  open_.fetch_sub(1, std::memory_order_relaxed);
}

void HttpServer::TakeFinished(TimePoint now) {
  std::vector<Finished> finished;
  {
    std::lock_guard<std::mutex> lock(finished_mu_);
    finished.swap(finished_);
  }
  for (Finished& f : finished) {
    for (const uint64_t id : f.waiters) {
      auto it = connections_.find(id);
      if (it == connections_.end()) continue;  // closed meanwhile
      Connection& c = *it->second;
      if (c.dead || c.state != Connection::State::kHandling || c.route != f.route) continue;
      answered_.fetch_add(1, std::memory_order_relaxed);
      Answer(c, f.answer.status, f.answer.content_type, f.answer.body, false, now);
      Advance(c, now);
    }
  }
}

void HttpServer::UpdateBuffered() {
  uint64_t total = 0;
  for (auto& [id, c] : connections_) total += c->reader.buffered() + c->Unsent();
  buffered_.store(total, std::memory_order_relaxed);
  if (total > peak_buffered_.load(std::memory_order_relaxed)) {
    peak_buffered_.store(total, std::memory_order_relaxed);
  }
}

void HttpServer::NotePressure(TimePoint now) {
  if (last_pressure_log_ != TimePoint() && now - last_pressure_log_ < kPressureLogInterval) return;
  const uint64_t evicted = evicted_.load(std::memory_order_relaxed);
  const uint64_t timed_out = timed_out_.load(std::memory_order_relaxed);
  uint64_t refused = 0;
  for (const auto& r : refused_) refused += r.load(std::memory_order_relaxed);
  if (evicted == logged_evicted_ && timed_out == logged_timed_out_ && refused == logged_refused_) {
    return;
  }
  LogWarning(
      "metrics endpoint: connections evicted at the cap, timed out, or requests refused "
      "(counts since the last such line; at most one a minute)",
      {{"evicted", StrCat(evicted - logged_evicted_)},
       {"timed_out", StrCat(timed_out - logged_timed_out_)},
       {"refused", StrCat(refused - logged_refused_)}});
  logged_evicted_ = evicted;
  logged_timed_out_ = timed_out;
  logged_refused_ = refused;
  last_pressure_log_ = now;
}

}  // namespace gpu_agent
