// The DRA devices of a generation: its chosen GPUs (each MIG-enabled GPU's
// MIG devices instead, under a MIG strategy), with the PCIe root of each
// read from sysfs. One function for `run` and `gpu-agent dra slices`, so
// both publish the same devices.
#ifndef GPU_AGENT_AGENT_RUN_DRA_DEVICES_H_
#define GPU_AGENT_AGENT_RUN_DRA_DEVICES_H_

#include <string>
#include <vector>

#include "agent/plan/generation.h"
#include "dra/dra_device.h"

namespace gpu_agent {

std::vector<dra::DraDevice> DraDevicesOf(const Generation& gen);

// The pool's name: the node's name (nodeName), else this host's name.
std::string DraPoolName(const Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_DRA_DEVICES_H_
