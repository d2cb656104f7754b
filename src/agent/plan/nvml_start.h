// Starting NVML once: the library loaded from the configured driver root and
// initialised. driver_wait.h retries this while a driver is being installed.
#ifndef GPU_AGENT_AGENT_PLAN_NVML_START_H_
#define GPU_AGENT_AGENT_PLAN_NVML_START_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

// Loads NVML under the configured driver root and initialises it.
absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> StartNvml(const Config& config);

struct Discovered {
  std::unique_ptr<nvml::NvmlLibrary> lib;
  nvml::Inventory inventory;
};
// StartNvml, then the GPUs discovered (sysfs under config.sysfs_root): what a
// one-shot command reads. Errors are NVML's or discovery's, as they are.
absl::StatusOr<Discovered> DiscoverGpus(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_NVML_START_H_
