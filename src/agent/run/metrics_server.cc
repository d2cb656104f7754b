#include "agent/run/metrics_server.h"

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "base/listen_address.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent {
namespace {

// Connections served by threads started on demand, at most `max` at once,
// none at idle (httplib's own pool keeps max(8, cores - 1) threads for good,
// 127 on a 128-core node). With a 1 s read timeout, a flood of idle
// connections delays a probe by about flood / max seconds (500 idle: 4 s,
// inside the liveness probe's 10 s) instead of flood / 8 x 5 s.
class OnDemandQueue final : public httplib::TaskQueue {
 public:
  explicit OnDemandQueue(size_t max) : max_(max) {}
  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(fn));
    if (running_ < max_) {
      ++running_;
      std::thread([this] { Run(); }).detach();
    }
  }
  // Returns once every started thread has finished its work.
  void shutdown() override {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return running_ == 0; });
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (pending_.empty()) {
          --running_;
          done_.notify_all();
          return;
        }
        fn = std::move(pending_.front());
        pending_.pop_front();
      }
      fn();
    }
  }

  const size_t max_;
  std::mutex mu_;
  std::condition_variable done_;
  std::deque<std::function<void()>> pending_;  // protected by mu_
  size_t running_ = 0;                         // protected by mu_
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    Handlers handlers) {
  absl::StatusOr<HostPort> hp = ParseListenAddress(address);
  if (!hp.ok()) return hp.status();
  std::unique_ptr<MetricsServer> m(new MetricsServer);
  m->server_ = std::make_unique<httplib::Server>();
  auto h = std::make_shared<Handlers>(std::move(handlers));
  m->server_->Get("/metrics", [h](const httplib::Request&, httplib::Response& res) {
    res.set_content(h->metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  m->server_->Get("/healthz", [h](const httplib::Request&, httplib::Response& res) {
    std::string why;
    if (!h->alive || h->alive(&why)) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("not alive: " + why + "\n", "text/plain");
    }
  });
  m->server_->Get("/readyz", [h](const httplib::Request&, httplib::Response& res) {
    std::string why;
    if (h->ready(&why)) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("not ready: " + why + "\n", "text/plain");
    }
  });
  // httplib's default adds SO_REUSEPORT, which lets a second process bind
  // the same port silently; a port in use must be an error.
  m->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  m->server_->new_task_queue = [] { return new OnDemandQueue(128); };
  m->server_->set_keep_alive_max_count(10);
  // A scraper or probe sends its request at once: an idle connection is
  // let go after 1 s, so it cannot hold a thread for long.
  m->server_->set_read_timeout(1, 0);
  m->server_->set_keep_alive_timeout(1);
  m->server_->set_tcp_nodelay(true);
  m->port_ = hp->port == 0 ? m->server_->bind_to_any_port(hp->host)
                           : (m->server_->bind_to_port(hp->host, hp->port) ? hp->port : -1);
  if (m->port_ <= 0) {
    return absl::FailedPreconditionError(
        StrCat("metrics.address \"", address, "\": cannot listen (", std::strerror(errno),
               "); is the port in use, or the address not on this host?"));
  }
  httplib::Server* srv = m->server_.get();
  m->thread_ = std::thread([srv] {
    NameThisThread("metrics");
    srv->listen_after_bind();
  });
  LogInfo("metrics endpoint listening",
          {{"address", StrCat(hp->host, ":", m->port_)}, {"paths", "/metrics /healthz /readyz"}});
  return m;
}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsIfConfigured(
    const Config& config, MetricsServer::Handlers handlers) {
  if (config.metrics.address.empty()) return std::unique_ptr<MetricsServer>();
  absl::StatusOr<std::unique_ptr<MetricsServer>> m =
      MetricsServer::Start(config.metrics.address, std::move(handlers));
  if (!m.ok()) {
    LogError("cannot start the metrics endpoint", {{"error", std::string(m.status().message())}});
  }
  return m;
}

}  // namespace gpu_agent
