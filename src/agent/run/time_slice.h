// A GPU's compute time slice, as a DRA claim's GpuConfig asks it. NVML
// documents no call that sets it (its only time-slice setting is the vGPU
// scheduler's), so the driver's own nvidia-smi does it, as NVIDIA's DRA
// driver does: `nvidia-smi compute-policy -i <uuid> --set-timeslice=<0..3>`
// (Default 0, Short 1, Medium 2, Long 3).
#ifndef GPU_AGENT_AGENT_RUN_TIME_SLICE_H_
#define GPU_AGENT_AGENT_RUN_TIME_SLICE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace gpu_agent {

using TimeSlicer =
    std::function<absl::Status(const std::string& uuid, const std::string& interval)>;

// Runs `<driver_root_here>/usr/bin/nvidia-smi` (the driver root as this
// process sees it) with the driver's library folders on LD_LIBRARY_PATH, 10 s
// at most. Errors name the program and carry what it printed: it is missing,
// it failed (its exit code), or the interval is not one of the four.
TimeSlicer NvidiaSmiTimeSlicer(const std::string& driver_root_here);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_TIME_SLICE_H_
