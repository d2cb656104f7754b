// The /metrics (Prometheus text), /healthz and /readyz endpoint. Off unless
// metrics.address is set. What is reported comes from callbacks the running
// mode provides; they must be thread-safe. The transport is HttpServer,
// bounded whatever a client sends (see http_server.h); each endpoint's
// callback runs on a thread of its own, so a slow /healthz holds up
// neither /metrics nor /readyz, and a flood of scrapes no probe.
#ifndef GPU_AGENT_AGENT_RUN_METRICS_SERVER_H_
#define GPU_AGENT_AGENT_RUN_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/run/http_server.h"

namespace gpu_agent {

class PromText;

class MetricsServer {
 public:
  struct Handlers {
    std::function<std::string()> metrics;
    // Ready to serve; `why` says what is missing when not.
    std::function<bool(std::string* why)> ready;
    // The threads that matter are alive (/healthz); `why` says which is not.
    // Unset: alive while this server answers.
    std::function<bool(std::string* why)> alive;
  };
  // The endpoint's own bounds; the defaults are the agent's.
  using Limits = HttpServer::Limits;
  using Stats = HttpServer::Stats;

  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              Handlers handlers);
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              Handlers handlers,
                                                              const Limits& limits);
  ~MetricsServer();  // Stop()
  // Stops answering; returns once no handler runs any more and every
  // thread of the endpoint has been joined.
  void Stop();
  int port() const { return server_ ? server_->port() : 0; }
  // What the endpoint has done (also in /metrics, as gpu_agent_metrics_*).
  Stats stats() const;

 private:
  MetricsServer() = default;
  std::unique_ptr<HttpServer> server_;
};

// The endpoint's own counters as Prometheus text (gpu_agent_metrics_*).
void RenderMetricsServerStats(const MetricsServer::Stats& stats, PromText* p);

// Starts /metrics, /healthz and /readyz when metrics.address is set (null
// when it is not). An error is logged here; the caller cleans up and exits.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsIfConfigured(
    const Config& config, MetricsServer::Handlers handlers);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_METRICS_SERVER_H_
