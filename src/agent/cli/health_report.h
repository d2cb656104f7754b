// `gpu-agent health`'s report: every polled check on every GPU, with its
// state, what it judged, and NVML's raw answers, as a table, JSON or YAML.
#ifndef GPU_AGENT_AGENT_CLI_HEALTH_REPORT_H_
#define GPU_AGENT_AGENT_CLI_HEALTH_REPORT_H_

#include <string>
#include <vector>

#include "health/health_check_catalog.h"
#include "health/health_poller.h"

namespace gpu_agent {

struct GpuHealthReport {
  unsigned index = 0;
  std::string uuid;
  std::string name;
  health::GpuVerdict verdict;
  std::string error;  // the GPU could not be read (then no checks)
};

struct HealthReport {
  std::string driver_version;
  health::CheckSettings settings;
  std::vector<GpuHealthReport> gpus;
  double poll_calls_per_gpu = 0;  // NVML calls of the poll, per GPU polled
};

// "healthy", "degraded" or "unhealthy": the worst severity among the GPU's
// failing checks (severity ignore counts for nothing); a lost GPU is unhealthy.
std::string GpuHealthWord(const GpuHealthReport& gpu, const health::CheckSettings& settings);

std::string HealthAsTable(const HealthReport& r);
std::string HealthAsJson(const HealthReport& r);
std::string HealthAsYaml(const HealthReport& r);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_HEALTH_REPORT_H_
