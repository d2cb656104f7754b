// NVIDIA's names for MIG profiles ("1g.10gb", "1c.3g.40gb"), from what an
// unprivileged process can read: the MIG device's own attributes and the
// parent's GPU-instance profiles. The parent's memory, which older names
// were computed from, needs privilege in MIG mode (nvmlDeviceGetMemoryInfo
// answers NO_PERMISSION in an unprivileged container).
#ifndef GPU_AGENT_NVML_MIG_PROFILE_H_
#define GPU_AGENT_NVML_MIG_PROFILE_H_

#include <string>
#include <vector>

#include "nvml/inventory.h"
#include "nvml/nvml_api.h"

namespace gpu_agent::nvml {

class NvmlLibrary;

// Every GPU-instance profile `parent` (MIG-enabled) offers, through
// nvmlDeviceGetGpuInstanceProfileInfoV where the driver has it (R510+, with
// NVML's profile names), else the unversioned call. Empty when neither
// answers.
std::vector<GpuInstanceProfile> ReadGpuInstanceProfiles(const NvmlLibrary& lib,
                                                        nvmlDevice_t parent);

// NVIDIA's profile name for `mig` on `parent`, or "" when NVML gave too
// little to name it. In order of preference:
//  1. the name NVML gives the GPU-instance profile that has the device's
//     slice count, memory and engines (R510+);
//  2. else go-nvlib's rule: the device's share of the parent's memory,
//     rounded up to eighths, times the parent's memory in whole GiB
//     (rounded up), with the parent's memory when NVML gave it, else the
//     memory of its largest profile (the whole GPU), which reproduces the
//     names of NVIDIA's MIG user guide for A100, A30 and H100.
// A compute instance smaller than its GPU instance gets a "<c>c." prefix.
// Attributes after '+' ("1g.10gb+me") are left out: a Kubernetes resource
// name cannot hold '+', so such a device is served under its base profile.
std::string MigProfileName(const GpuRecord& parent, const MigRecord& mig);

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_MIG_PROFILE_H_
