// Loading and initialising NVML from the configured driver root.
#include "agent/plan/nvml_start.h"

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

absl::StatusOr<Discovered> DiscoverGpus(const Config& config) {
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib = StartNvml(config);
  if (!lib.ok()) return lib.status();
  absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(**lib, config.sysfs_root);
  if (!inv.ok()) return inv.status();
  return Discovered{*std::move(lib), *std::move(inv)};
}

}  // namespace gpu_agent
