// Starting NVML once: the library loaded from the configured driver root and
// initialised. driver_wait.h retries this while a driver is being installed.
#ifndef GPU_AGENT_AGENT_NVML_START_H_
#define GPU_AGENT_AGENT_NVML_START_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/config.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

// Loads NVML under the configured driver root and initialises it.
absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> StartNvml(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_NVML_START_H_
