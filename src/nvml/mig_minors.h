// The driver's table of MIG capability device minors,
// <procRoot>/driver/nvidia-caps/mig-minors: one "<capability> <minor>" per
// line, e.g. "gpu0/gi1/access 12" and "gpu0/gi1/ci0/access 13". A container
// using a MIG device needs /dev/nvidia-caps/nvidia-cap<minor> for both its
// GPU instance and its compute instance.
#ifndef GPU_AGENT_NVML_MIG_MINORS_H_
#define GPU_AGENT_NVML_MIG_MINORS_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpu_agent::nvml {

class MigMinors {
 public:
  // Parses the file's text; errors name `file`, the line and what is wrong.
  static absl::StatusOr<MigMinors> Parse(std::string_view text, const std::string& file);
  // Reads <proc_root>/driver/nvidia-caps/mig-minors.
  static absl::StatusOr<MigMinors> Read(const std::string& proc_root);

  // The capability device nodes for MIG device (gi, ci) on the GPU with
  // driver minor `gpu_minor`: {gi access, ci access} as
  // "/dev/nvidia-caps/nvidia-cap<N>". kNotFound names the missing entry.
  absl::StatusOr<std::vector<std::string>> DeviceNodes(int gpu_minor, int gi, int ci) const;

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::map<std::string, int> minors_;
};

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_MIG_MINORS_H_
