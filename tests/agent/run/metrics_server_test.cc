// The metrics endpoint over real sockets on 127.0.0.1: its answers, and
// what a hostile client cannot do to it (endless headers, a huge body,
// thousands of idle connections, pipelining, a flood of scrapes, a slow
// handler, a client that does not read), and Stop() with all of that open.
#include "agent/run/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.h"

namespace gpu_agent {
namespace {

using ::gpu_agent::testing::ConnectLoopback;
using ::gpu_agent::testing::ReadFile;
using ::gpu_agent::testing::WaitFor;

// A client socket; reads and writes give up after 10 s (a bound on a
// failure, never a wait for something).
class Client {
 public:
  explicit Client(int port) {
    fd_ = ConnectLoopback(port);
    connected_ = fd_ >= 0;
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(Client&& o) noexcept : fd_(o.fd_), connected_(o.connected_), pending_(o.pending_) {
    o.fd_ = -1;
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  struct Answer {
    int status = 0;
    std::map<std::string, std::string> headers;  // names in lower case
    std::string body;
  };
  // The next answer; its body is read unless `head_only`.
  std::optional<Answer> Read(bool head_only = false) {
    size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    Answer a;
    std::istringstream in(pending_.substr(0, end));
    std::string line;
    std::getline(in, line);
    if (line.rfind("HTTP/1.1 ", 0) != 0) return std::nullopt;
    a.status = std::stoi(line.substr(9, 3));
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      a.headers[name] = line.substr(colon + 2);
    }
    pending_.erase(0, end + 4);
    const size_t length = head_only ? 0 : std::stoul(a.headers["content-length"]);
    while (pending_.size() < length) {
      if (!Fill()) return std::nullopt;
    }
    a.body = pending_.substr(0, length);
    pending_.erase(0, length);
    return a;
  }
  // True once the server has closed (EOF or a reset) with nothing more sent.
  bool Closed() {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  bool Fill() {
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string pending_;
};

// A handler blocks in Wait() until the test opens the latch.
class Latch {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

MetricsServer::Handlers PlainHandlers() {
  MetricsServer::Handlers h;
  h.metrics = [] { return std::string("test_metric 1\n"); };
  h.ready = [](std::string*) { return true; };
  h.alive = [](std::string* why) {
    *why = "the test says so";
    return false;
  };
  return h;
}

std::unique_ptr<MetricsServer> StartOrDie(MetricsServer::Handlers h,
                                          const MetricsServer::Limits& limits = {}) {
  auto m = MetricsServer::Start("127.0.0.1:0", std::move(h), limits);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

long RssAnonKib() {
  std::istringstream in(ReadFile("/proc/self/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  }
  return -1;
}

size_t Threads() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)e;
    ++n;
  }
  return n;
}

TEST(MetricsServerTest, AnswersAsBefore) {
  auto server = StartOrDie(PlainHandlers());
  ASSERT_NE(server, nullptr);
  Client c(server->port());
  ASSERT_TRUE(c.connected());
  // Keep-alive: every answer on one connection.
  ASSERT_TRUE(c.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(a->body.rfind("test_metric 1\n", 0), 0u) << a->body;
  EXPECT_NE(a->body.find("gpu_agent_metrics_connections_accepted_total 1\n"), std::string::npos)
      << a->body;
  EXPECT_FALSE(a->headers.count("connection"));
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\n\r\n"));
  a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 503);
  EXPECT_EQ(a->body, "not alive: the test says so\n");
  EXPECT_EQ(a->headers["content-type"], "text/plain");
  ASSERT_TRUE(c.Send("GET /readyz HTTP/1.1\r\n\r\n"));
  a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body, "ok\n");
  ASSERT_TRUE(c.Send("GET /nope HTTP/1.1\r\n\r\n"));
  a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 404);
  // HEAD: the length of what GET sends, and no body (the next answer
  // follows at once).
  ASSERT_TRUE(c.Send("HEAD /readyz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n"));
  a = c.Read(/*head_only=*/true);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->headers["content-length"], "3");
  a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->body, "ok\n");
  // Connection: close is honoured.
  ASSERT_TRUE(c.Send("GET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n"));
  a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->headers["connection"], "close");
  EXPECT_TRUE(c.Closed());
  EXPECT_EQ(server->stats().requests_answered, 7u);
}

TEST(MetricsServerTest, UnsetAliveIsAliveAndNotReadySaysWhy) {
  MetricsServer::Handlers h = PlainHandlers();
  h.alive = nullptr;
  h.ready = [](std::string* why) {
    *why = "waiting for the NVIDIA driver";
    return false;
  };
  auto server = StartOrDie(h);
  ASSERT_NE(server, nullptr);
  Client c(server->port());
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n"));
  auto a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body, "ok\n");
  a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 503);
  EXPECT_EQ(a->body, "not ready: waiting for the NVIDIA driver\n");
}

// Each refusal: its status, Connection: close, the connection closed after
// the answer, and the refusal counted.
TEST(MetricsServerTest, RefusalsAnswerAndClose) {
  auto server = StartOrDie(PlainHandlers());
  ASSERT_NE(server, nullptr);
  struct Case {
    std::string raw;
    int status;
  };
  std::map<int, uint64_t> want;
  for (const Case& c : std::vector<Case>{
           {"GET /metrics\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400},
           {"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405},
           {"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 413},
           {"GET /" + std::string(2000, 'a') + " HTTP/1.1\r\n\r\n", 414},
           {"GET /metrics HTTP/1.1\r\nX: " + std::string(5000, 'a') + "\r\n\r\n", 431},
           {"GET /metrics HTTP/2.0\r\n\r\n", 505},
       }) {
    Client client(server->port());
    ASSERT_TRUE(client.Send(c.raw));
    auto a = client.Read();
    ASSERT_TRUE(a) << c.raw.substr(0, 40);
    EXPECT_EQ(a->status, c.status) << c.raw.substr(0, 40);
    EXPECT_EQ(a->headers["connection"], "close");
    EXPECT_EQ(a->headers.count("allow"), c.status == 405 ? 1u : 0u);
    if (c.status == 405) {
      EXPECT_EQ(a->headers["allow"], "GET, HEAD");
    }
    EXPECT_TRUE(client.Closed()) << c.status;
    ++want[c.status];
  }
  const MetricsServer::Stats s = server->stats();
  for (const auto& [status, n] : want) EXPECT_EQ(s.requests_refused.at(status), n) << status;
  EXPECT_EQ(s.requests_answered, 0u);
  // The counters reach /metrics.
  Client c(server->port());
  ASSERT_TRUE(c.Send("GET /metrics HTTP/1.1\r\n\r\n"));
  auto a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_NE(a->body.find("gpu_agent_metrics_requests_refused_total{code=\"400\"} 2\n"),
            std::string::npos)
      << a->body;
  EXPECT_NE(a->body.find("gpu_agent_metrics_requests_refused_total{code=\"431\"} 1\n"),
            std::string::npos);
}

// One connection sending header lines without end: 431 once the head
// passes its cap, then closed; the server never holds more than the cap.
TEST(MetricsServerTest, EndlessHeadersAre431AndMemoryStaysBounded) {
  auto server = StartOrDie(PlainHandlers());
  ASSERT_NE(server, nullptr);
  const long rss_before = RssAnonKib();
  for (const std::string& line :
       {"X-Flood: " + std::string(8 * 1024, 'a') + "\r\n", std::string("X: y\r\n")}) {
    Client c(server->port());
    std::atomic<size_t> sent{0};
    std::thread writer([&] {
      if (!c.Send("GET /metrics HTTP/1.1\r\n")) return;
      // Until the server closes (a reset or a broken pipe), at most 256 MiB.
      while (sent < (size_t{256} << 20) && c.Send(line)) sent += line.size();
    });
    auto a = c.Read();
    writer.join();
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, 431);
    EXPECT_TRUE(c.Closed());
    EXPECT_LT(sent.load(), size_t{256} << 20) << "the server kept reading";
  }
  const MetricsServer::Stats s = server->stats();
  EXPECT_EQ(s.requests_refused.at(431), 2u);
  EXPECT_LE(s.peak_buffered_bytes, 4096u + 512u);
  // Before the bounds, the agent held every header line: 1.1 GB in 20 s.
  EXPECT_LT(RssAnonKib() - rss_before, 16 * 1024);
}

// A body of 100 GB announced: 413 at once, and the body is not read (the
// connection is closed while the client is still sending).
TEST(MetricsServerTest, HugeBodyIs413WithoutReadingIt) {
  auto server = StartOrDie(PlainHandlers());
  ASSERT_NE(server, nullptr);
  Client c(server->port());
  ASSERT_TRUE(c.Send("GET /metrics HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\n"));
  std::atomic<size_t> sent{0};
  std::thread writer([&] {
    const std::string chunk(64 * 1024, 'b');
    while (sent < (size_t{256} << 20) && c.Send(chunk)) sent += chunk.size();
  });
  auto a = c.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 413);
  EXPECT_TRUE(c.Closed());
  writer.join();
  EXPECT_LT(sent.load(), size_t{256} << 20) << "the server kept reading the body";
  EXPECT_EQ(server->stats().requests_refused.at(413), 1u);
}

// 2,500 idle connections (fewer if the descriptor limit is lower), then a
// probe: it gets in, because each new connection past the cap evicts the
// one idle longest.
TEST(MetricsServerTest, ThousandsOfIdleConnectionsDoNotKeepAProbeOut) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const size_t want = 2500;
  const size_t room = rl.rlim_cur > 300 ? static_cast<size_t>(rl.rlim_cur) - 300 : 0;
  const size_t count = std::min(want, room);
  if (count < want) {
    std::printf("descriptor limit %llu: %zu idle connections instead of %zu\n",
                static_cast<unsigned long long>(rl.rlim_cur), count, want);
  }
  ASSERT_GT(count, 200u) << "too few descriptors for the test";
  auto server = StartOrDie(PlainHandlers());
  ASSERT_NE(server, nullptr);
  std::vector<Client> idle;
  idle.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    idle.emplace_back(server->port());
    ASSERT_TRUE(idle.back().connected()) << i;
  }
  ASSERT_TRUE(WaitFor([&] { return server->stats().connections_accepted == count; }))
      << server->stats().connections_accepted;
  EXPECT_LE(server->stats().connections_open, 128u);
  Client probe(server->port());
  ASSERT_TRUE(probe.Send("GET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n"));
  auto a = probe.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  const MetricsServer::Stats s = server->stats();
  EXPECT_GT(s.connections_evicted, 0u);
  // Each one past the cap was evicted, or closed on its deadline.
  EXPECT_GE(s.connections_evicted + s.connections_timed_out, count - 128);
  EXPECT_LE(s.connections_open, 128u);
}

TEST(MetricsServerTest, TwentyPipelinedRequestsGetTwentyAnswersInOrder) {
  auto server = StartOrDie(PlainHandlers());
  ASSERT_NE(server, nullptr);
  const char* paths[] = {"/metrics", "/healthz", "/readyz", "/nope"};
  const int statuses[] = {200, 503, 200, 404};
  std::string raw;
  for (int i = 0; i < 20; ++i) {
    raw += std::string("GET ") + paths[i % 4] + " HTTP/1.1\r\nHost: x\r\n" +
           (i == 19 ? "Connection: close\r\n" : "") + "\r\n";
  }
  Client c(server->port());
  ASSERT_TRUE(c.Send(raw));
  for (int i = 0; i < 20; ++i) {
    auto a = c.Read();
    ASSERT_TRUE(a) << "answer " << i;
    EXPECT_EQ(a->status, statuses[i % 4]) << "answer " << i;
    if (i % 4 == 0) {
      EXPECT_EQ(a->body.rfind("test_metric 1\n", 0), 0u) << i;
    }
    if (i % 4 == 2) {
      EXPECT_EQ(a->body, "ok\n") << i;
    }
  }
  EXPECT_TRUE(c.Closed());
  EXPECT_EQ(server->stats().requests_answered, 20u);
}

// /healthz blocked in its handler: /metrics and /readyz are answered
// meanwhile, and /healthz once its handler returns.
TEST(MetricsServerTest, ASlowHealthzHoldsUpNoOtherEndpoint) {
  Latch latch;
  MetricsServer::Handlers h = PlainHandlers();
  h.alive = [&](std::string*) {
    latch.Wait();
    return true;
  };
  auto server = StartOrDie(h);
  ASSERT_NE(server, nullptr);
  Client healthz(server->port());
  ASSERT_TRUE(healthz.Send("GET /healthz HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return latch.waiting() == 1; }));
  Client other(server->port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(other.Send("GET /metrics HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n"));
    auto a = other.Read();
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, 200);
    a = other.Read();
    ASSERT_TRUE(a);
    EXPECT_EQ(a->body, "ok\n");
  }
  latch.Open();
  auto a = healthz.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
}

// /metrics blocked, with a hundred scrapes waiting and more pipelined
// behind them: /healthz is answered meanwhile; the scrapes share the
// evaluations that follow.
TEST(MetricsServerTest, AFloodOfScrapesHoldsUpNoProbe) {
  Latch latch;
  std::atomic<int> evaluations{0};
  MetricsServer::Handlers h = PlainHandlers();
  h.metrics = [&] {
    ++evaluations;
    latch.Wait();
    return std::string("test_metric 1\n");
  };
  h.alive = nullptr;
  auto server = StartOrDie(h);
  ASSERT_NE(server, nullptr);
  std::vector<Client> scrapers;
  std::string five;
  for (int i = 0; i < 5; ++i) five += "GET /metrics HTTP/1.1\r\n\r\n";
  for (int i = 0; i < 100; ++i) {
    scrapers.emplace_back(server->port());
    ASSERT_TRUE(scrapers.back().Send(five));
  }
  ASSERT_TRUE(WaitFor([&] { return latch.waiting() == 1; }));
  for (int i = 0; i < 3; ++i) {
    Client probe(server->port());
    ASSERT_TRUE(probe.Send("GET /healthz HTTP/1.1\r\n\r\n"));
    auto a = probe.Read();
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, 200);
  }
  latch.Open();
  for (Client& s : scrapers) {
    for (int i = 0; i < 5; ++i) {
      auto a = s.Read();
      ASSERT_TRUE(a);
      EXPECT_EQ(a->status, 200);
    }
  }
  // 500 scrapes, one evaluation for many of them.
  EXPECT_LT(evaluations.load(), 100);
}

// Bounds in time: a head not finished in time, and an answer not read in
// time, close the connection.
TEST(MetricsServerTest, HeadAndWriteDeadlines) {
  MetricsServer::Limits limits;
  limits.head_timeout = std::chrono::milliseconds(300);
  limits.write_timeout = std::chrono::milliseconds(300);
  MetricsServer::Handlers h = PlainHandlers();
  // More than loopback's socket buffers take (about 4 MB here).
  h.metrics = [] { return std::string(16 << 20, 'm'); };
  auto server = StartOrDie(h, limits);
  ASSERT_NE(server, nullptr);
  Client partial(server->port());
  ASSERT_TRUE(partial.Send("GET /metrics HTTP/1.1\r\nHost"));
  Client reader(server->port());
  ASSERT_TRUE(reader.Send("GET /metrics HTTP/1.1\r\n\r\n"));  // and never read
  EXPECT_TRUE(partial.Closed());
  ASSERT_TRUE(WaitFor([&] { return server->stats().connections_timed_out == 2; }))
      << server->stats().connections_timed_out;
  ASSERT_TRUE(WaitFor([&] { return server->stats().connections_open == 0; }));
  // A closed connection's buffer is let go just after it is counted closed.
  EXPECT_TRUE(WaitFor([&] { return server->stats().buffered_bytes == 0; }))
      << server->stats().buffered_bytes;
}

// At the cap, a new connection evicts the one idle longest; one waiting
// for its handler stays.
TEST(MetricsServerTest, EvictionTakesTheIdleLongestFirst) {
  MetricsServer::Limits limits;
  limits.max_connections = 4;
  limits.head_timeout = std::chrono::minutes(10);  // nothing closes on time here
  Latch latch;
  MetricsServer::Handlers h = PlainHandlers();
  h.ready = [&](std::string*) {
    latch.Wait();
    return true;
  };
  auto server = StartOrDie(h, limits);
  ASSERT_NE(server, nullptr);
  Client waiting(server->port());
  ASSERT_TRUE(waiting.Send("GET /readyz HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return latch.waiting() == 1; }));
  std::vector<Client> idle;
  for (int i = 0; i < 3; ++i) {
    idle.emplace_back(server->port());
    ASSERT_TRUE(WaitFor([&] { return server->stats().connections_accepted == 2u + i; }));
  }
  Client fresh(server->port());
  EXPECT_TRUE(idle[0].Closed());
  EXPECT_EQ(server->stats().connections_evicted, 1u);
  Client fresher(server->port());
  EXPECT_TRUE(idle[1].Closed());
  EXPECT_EQ(server->stats().connections_evicted, 2u);
  EXPECT_EQ(server->stats().connections_open, 4u);
  latch.Open();
  auto a = waiting.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
}

// Every slot taken by complete /metrics requests waiting for a slow
// handler: each new one evicts one of those, never the probe waiting for
// /healthz, which is answered once its handler returns.
TEST(MetricsServerTest, AFloodOfCompleteRequestsNeverEvictsAWaitingProbe) {
  MetricsServer::Limits limits;
  limits.max_connections = 4;
  limits.head_timeout = std::chrono::minutes(10);
  Latch health, metrics;
  MetricsServer::Handlers h = PlainHandlers();
  h.alive = [&](std::string*) {
    health.Wait();
    return true;
  };
  h.metrics = [&] {
    metrics.Wait();
    return std::string("m 1\n");
  };
  auto server = StartOrDie(h, limits);
  ASSERT_NE(server, nullptr);
  Client probe(server->port());
  ASSERT_TRUE(probe.Send("GET /healthz HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return health.waiting() == 1; }));
  std::vector<Client> flood;
  for (int i = 0; i < 12; ++i) {
    flood.emplace_back(server->port());
    ASSERT_TRUE(flood.back().Send("GET /metrics HTTP/1.1\r\n\r\n"));
    ASSERT_TRUE(WaitFor([&] { return server->stats().connections_accepted == 2u + i; }));
  }
  ASSERT_TRUE(WaitFor([&] { return server->stats().connections_evicted >= 9u; }));
  // Not evicted: its answer comes once the handler returns.
  health.Open();
  auto a = probe.Read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  metrics.Open();
}

// Stop() with idle connections, a head half sent, an answer not read and
// scrapes pipelined: it returns, every thread of the endpoint is joined, and
// every client sees its connection closed.
TEST(MetricsServerTest, StopWithConnectionsOpenJoinsEveryThread) {
  const size_t threads_before = Threads();
  MetricsServer::Handlers h = PlainHandlers();
  // More than loopback's socket buffers take (about 4 MB here).
  h.metrics = [] { return std::string(16 << 20, 'm'); };
  auto server = StartOrDie(h);
  ASSERT_NE(server, nullptr);
  std::vector<Client> clients;
  for (int i = 0; i < 20; ++i) clients.emplace_back(server->port());
  ASSERT_TRUE(clients[0].Send("GET /metrics HTTP/1.1\r\nHo"));
  std::string many;
  for (int i = 0; i < 20; ++i) many += "GET /metrics HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(clients[1].Send(many));
  ASSERT_TRUE(clients[2].Send("GET /healthz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return server->stats().connections_open == 20; }));
  ASSERT_TRUE(WaitFor([&] { return server->stats().buffered_bytes > (1u << 20); }));
  server->Stop();
  EXPECT_EQ(server->stats().connections_open, 0u);
  for (size_t i = 3; i < clients.size(); ++i) EXPECT_TRUE(clients[i].Closed()) << i;
  ASSERT_TRUE(WaitFor([&] { return Threads() == threads_before; }))
      << Threads() << " threads, " << threads_before << " before";
  server->Stop();  // again: harmless
  server.reset();
}

// An idle endpoint holds one thread: the handlers' threads come and go with
// the requests.
TEST(MetricsServerTest, IdleEndpointHoldsOneThread) {
  const size_t threads_before = Threads();
  auto server = StartOrDie(PlainHandlers());
  ASSERT_NE(server, nullptr);
  {
    Client c(server->port());
    ASSERT_TRUE(
        c.Send("GET /metrics HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n"
               "GET /readyz HTTP/1.1\r\n\r\n"));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.Read());
  }
  EXPECT_TRUE(WaitFor([&] { return Threads() == threads_before + 1; }))
      << Threads() << " threads, " << threads_before << " before";
}

TEST(MetricsServerTest, PortInUseIsAnError) {
  auto first = StartOrDie(PlainHandlers());
  ASSERT_NE(first, nullptr);
  auto second = MetricsServer::Start("127.0.0.1:" + std::to_string(first->port()), PlainHandlers());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(std::string(second.status().message()).find("cannot listen"), std::string::npos)
      << second.status();
}

TEST(MetricsServerTest, ListensOnIpv6Loopback) {
  auto server = MetricsServer::Start("::1:0", PlainHandlers());
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status();
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_port = htons(static_cast<uint16_t>((*server)->port()));
  addr.sin6_addr = in6addr_loopback;
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string req = "GET /readyz HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  char buf[256];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ::close(fd);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
}

}  // namespace
}  // namespace gpu_agent
