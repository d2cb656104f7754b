// The /metrics (Prometheus text), /healthz and /readyz endpoint, on
// cpp-httplib. Off unless metrics.address is set. What is reported comes
// from callbacks the running mode provides; they must be thread-safe.
#ifndef GPU_AGENT_AGENT_METRICS_SERVER_H_
#define GPU_AGENT_AGENT_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace gpu_agent {

// Builds Prometheus text exposition format: one HELP and TYPE per family,
// label values escaped.
class PromText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  void Family(const std::string& name, const std::string& type, const std::string& help);
  void Sample(const std::string& name, const Labels& labels, double value);
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// "host:port", ":port" (all addresses) or "[v6]:port"; port 0 picks one.
absl::Status ValidateListenAddress(const std::string& address);

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

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_METRICS_SERVER_H_
