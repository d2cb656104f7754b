// The labels every GPU node gets from its driver and CUDA, for a node on
// driver 550.54.15 with CUDA 12.4 (the fixtures' and gpu_records.h's
// driver), and a way to add to or override a set of labels. Header-only:
// labels are plain strings, so unit and integration tests share it without
// linking the labeller.
#ifndef GPU_AGENT_TESTS_SUPPORT_DRIVER_LABELS_H_
#define GPU_AGENT_TESTS_SUPPORT_DRIVER_LABELS_H_

#include <map>
#include <string>

namespace gpu_agent::testing {

using LabelSet = std::map<std::string, std::string>;

inline LabelSet DriverLabels() {
  return {{"nvidia.com/cuda.driver.major", "550"},
          {"nvidia.com/cuda.driver.minor", "54"},
          {"nvidia.com/cuda.driver.rev", "15"},
          {"nvidia.com/cuda.driver-version.major", "550"},
          {"nvidia.com/cuda.driver-version.minor", "54"},
          {"nvidia.com/cuda.driver-version.revision", "15"},
          {"nvidia.com/cuda.driver-version.full", "550.54.15"},
          {"nvidia.com/cuda.runtime.major", "12"},
          {"nvidia.com/cuda.runtime.minor", "4"},
          {"nvidia.com/cuda.runtime-version.major", "12"},
          {"nvidia.com/cuda.runtime-version.minor", "4"},
          {"nvidia.com/cuda.runtime-version.full", "12.4"},
          {"nvidia.com/gpu.present", "true"}};
}

// `base` with each of `more` set (added or replaced).
inline LabelSet With(LabelSet base, const LabelSet& more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_DRIVER_LABELS_H_
