// Loading and initialising NVML from the configured driver root.
#include "agent/nvml_start.h"

#include "base/log.h"

namespace gpu_agent {

absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> StartNvml(const Config& config) {
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib =
      nvml::NvmlLibrary::Open(config.flags.DriverRootHere());
  if (!lib.ok()) return lib.status();
  if (absl::Status s = (*lib)->Init(); !s.ok()) return s;
  LogDebug("NVML loaded", {{"path", (*lib)->path()}});
  return lib;
}

}  // namespace gpu_agent
