// Renders the NVML inventory for `gpu-agent devices` as a table, JSON or YAML.
#ifndef GPU_AGENT_AGENT_CLI_DEVICE_REPORT_H_
#define GPU_AGENT_AGENT_CLI_DEVICE_REPORT_H_

#include <string>

#include "nvml/inventory.h"

namespace gpu_agent {

std::string DevicesAsTable(const nvml::Inventory& inv);
// A JSON array, one object per GPU (index, uuid, name, memoryMiB, minor,
// pciBusId, numaNode, ...).
std::string DevicesAsJson(const nvml::Inventory& inv);
std::string DevicesAsYaml(const nvml::Inventory& inv);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_DEVICE_REPORT_H_
