// Which GPUs the agent exposes: include/exclude selectors and a cap, from
// `devices:` in the config. Pure: works on inventory records.
#ifndef GPU_AGENT_AGENT_CONFIG_DEVICE_SELECTION_H_
#define GPU_AGENT_AGENT_CONFIG_DEVICE_SELECTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct GpuSelector {
  enum class Kind { kUuid, kIndex, kPciDeviceId, kName };
  Kind kind = Kind::kUuid;
  std::string text;   // as written, for messages
  std::string where;  // "devices.include[2]"
  std::string value;  // kUuid: the UUID; kName: the glob
  unsigned index = 0;
  uint32_t pci_id = 0;  // kPciDeviceId: 16-bit device id, or 32-bit (device << 16) | vendor

  bool Matches(const nvml::GpuRecord& gpu) const;
  // Names exactly one GPU (uuid:, index:) rather than a pattern.
  bool Exact() const { return kind == Kind::kUuid || kind == Kind::kIndex; }
};

// "uuid:GPU-...", "index:3", "pci:0x20b2", "name:*A100*"; a bare "GPU-..."
// is a UUID and a bare number an index. Anything else is an error that
// names `where` and the accepted forms.
absl::StatusOr<GpuSelector> ParseGpuSelector(std::string_view text, std::string where);

// Checks every selector of `selection` parses and the cap is sane.
absl::Status ValidateDeviceSelection(const Config::DeviceSelection& selection);

struct GpuChoice {
  std::vector<size_t> chosen;         // positions in the inventory's gpus, ascending
  std::vector<std::string> warnings;  // selectors that matched nothing, GPUs cut by the cap
};

// Applies include (empty: all), then exclude, then the cap. A GPU named
// exactly (uuid:/index:) by an include and also matched by an exclude is a
// contradiction and an error; an exclude may narrow a pattern include.
absl::StatusOr<GpuChoice> ChooseGpus(const Config::DeviceSelection& selection,
                                     const std::vector<nvml::GpuRecord>& gpus);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_DEVICE_SELECTION_H_
