// The /metrics (Prometheus text), /healthz and /readyz endpoint, on
// cpp-httplib. Off unless metrics.address is set. What is reported comes
// from callbacks the running mode provides; they must be thread-safe.
#ifndef GPU_AGENT_AGENT_RUN_METRICS_SERVER_H_
#define GPU_AGENT_AGENT_RUN_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "agent/config/config.h"

namespace httplib {
class Server;
}

namespace gpu_agent {

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
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              Handlers handlers);
  ~MetricsServer();  // Stop()
  // Stops answering; returns once no handler runs any more.
  void Stop();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Starts /metrics, /healthz and /readyz when metrics.address is set (null
// when it is not). An error is logged here; the caller cleans up and exits.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsIfConfigured(
    const Config& config, MetricsServer::Handlers handlers);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_METRICS_SERVER_H_
