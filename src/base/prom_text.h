// Prometheus text exposition format, built a metric family and a sample at a
// time.
#ifndef GPU_AGENT_BASE_PROM_TEXT_H_
#define GPU_AGENT_BASE_PROM_TEXT_H_

#include <string>
#include <utility>
#include <vector>

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

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_PROM_TEXT_H_
