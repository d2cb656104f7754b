// Which of the node's GPUs the other side of a mode handover still holds,
// from what the kubelet's PodResources API says running pods hold
// (podresources/pod_resources.h). A GPU is held by the device plugin when
// any container holds a device-plugin device whose ID is the GPU's UUID,
// one of its MIG devices' UUIDs, or a time-slice replica of either
// ("<UUID>::<n>"), whatever the resource name (deviceIDStrategy uuid, this
// agent's and NVIDIA's plugin's default); or, under a GPU resource name
// (nvidia.com/..., or one the model advertises its units under), whose ID
// is the GPU's index or one of its MIG devices' ("3", "3:1", and their
// replicas: deviceIDStrategy index). A GPU is held through DRA when a
// container uses a device of `driver` that is one of the GPU's units.
//
// Held is per physical GPU: a pod holding one MIG device keeps the whole
// GPU from the other side, whose units may be cut differently.
#ifndef GPU_AGENT_AGENT_RUN_GPUS_HELD_H_
#define GPU_AGENT_AGENT_RUN_GPUS_HELD_H_

#include <map>
#include <set>
#include <string>

#include "agent/plan/device_model.h"
#include "nvml/inventory.h"
#include "podresources/pod_resources.h"

namespace gpu_agent {

// GPU UUID -> the pods ("namespace/name") that hold it.
using GpusHeld = std::map<std::string, std::set<std::string>>;

// The model's GPUs that device-plugin devices in `pods` name.
GpusHeld HeldByDevicePlugin(const DeviceModel& model, const nvml::Inventory& inventory,
                            const podresources::PodResources& pods);

// The model's GPUs whose units `pods` use through DRA claims of `driver`
// (a device is a unit by its name, DeviceUnit::name).
GpusHeld HeldThroughDra(const DeviceModel& model, const nvml::Inventory& inventory,
                        const podresources::PodResources& pods, const std::string& driver);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_GPUS_HELD_H_
