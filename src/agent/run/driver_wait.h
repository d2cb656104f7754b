// Waiting for the NVIDIA driver at start: on a node whose driver a driver
// container installs, the agent may start before NVML can be loaded. With
// driver.waitTimeout set, NVML is tried again with backoff until it loads,
// the timeout passes, or SIGTERM/SIGINT comes; meanwhile /healthz answers 200
// and /readyz 503 saying what is missing.
#ifndef GPU_AGENT_AGENT_RUN_DRIVER_WAIT_H_
#define GPU_AGENT_AGENT_RUN_DRIVER_WAIT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

// NVML started, or why not: the last error once the wait is over (or at
// once when driver.waitTimeout is 0), kCancelled when a signal asked the
// agent to stop while waiting.
absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> StartNvmlWaitingForDriver(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_DRIVER_WAIT_H_
