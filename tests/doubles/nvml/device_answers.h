// The discovery queries' answers from the fixture's device tree, written once
// for both NVML doubles (the dlopen stand-in and the in-process fake), as
// health_answers.h is for the health queries. `Node` is the double's device
// type (derived from DeviceNode); each function runs after the double's own
// prologue (NVML initialised, handle known, GPU not lost, no injected
// failure).
#ifndef GPU_AGENT_TESTS_DOUBLES_NVML_DEVICE_ANSWERS_H_
#define GPU_AGENT_TESTS_DOUBLES_NVML_DEVICE_ANSWERS_H_

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fixture.h"
#include "health_answers.h"
#include "nvml/nvml_api.h"

namespace fake_nvml {

// The physical GPU a handle stands for: itself, or a MIG device's parent.
template <class Node>
const Node& PhysicalGpu(const Node& d) {
  return d.is_mig ? *d.parent : d;
}

inline void FillPci(const GpuFixture& gpu, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  const std::string& id = gpu.pci_bus_id;
  std::snprintf(pci->busId, sizeof pci->busId, "%s", id.c_str());
  // The legacy field holds the 4-digit-domain form, 16 bytes with the NUL.
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", id.substr(4).c_str());
  pci->domain = static_cast<unsigned>(std::stoul(id.substr(0, 8), nullptr, 16));
  pci->bus = static_cast<unsigned>(std::stoul(id.substr(9, 2), nullptr, 16));
  pci->device = static_cast<unsigned>(std::stoul(id.substr(12, 2), nullptr, 16));
  pci->pciDeviceId = gpu.pci_device_id;
  pci->pciSubSystemId = gpu.pci_subsystem_id;
}

// nvmlDeviceGetHandleByUUID over GPUs and their MIG devices. nvml.h:
// GPU_IS_LOST "if any GPU has fallen off the bus or is otherwise
// inaccessible" (the search touches every GPU), unlike the lookup by index.
template <class Node>
nvmlReturn_t FindByUuid(const std::vector<std::unique_ptr<Node>>& gpus, const char* uuid,
                        Node** found) {
  for (const auto& g : gpus) {
    if (g->gpu.lost) return NVML_ERROR_GPU_IS_LOST;
  }
  for (const auto& g : gpus) {
    if (g->gpu.uuid == uuid) {
      *found = g.get();
      return NVML_SUCCESS;
    }
    for (const auto& m : g->mig_children) {
      if (m->mig.uuid == uuid) {
        *found = m.get();
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// nvmlDeviceGetName: a MIG device is named after its GPU and its size.
template <class Node>
std::string DeviceName(const Node& d) {
  if (!d.is_mig) return d.gpu.name;
  return d.parent->gpu.name + " MIG " + std::to_string(d.mig.gpu_instance_slices) + "g." +
         std::to_string((d.mig.memory_mib + 1023) / 1024) + "gb";
}

// nvmlDeviceGetMemoryInfo. NVML's note: in MIG mode the GPU's own
// (aggregate) figures need privilege; each MIG device's are open to all.
template <class Node>
nvmlReturn_t AnswerMemoryInfo(const Node& d, bool privileged, nvmlMemory_t* memory) {
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d.is_mig && d.gpu.mig_enabled && !privileged) return NVML_ERROR_NO_PERMISSION;
  const unsigned long long mib = d.is_mig ? d.mig.memory_mib : d.gpu.memory_mib;
  memory->total = mib * 1024ULL * 1024ULL;
  memory->used = std::min<unsigned long long>(memory->total, 512ULL * 1024 * 1024);
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

template <class Node>
nvmlReturn_t AnswerComputeCapability(const Node& d, int* major, int* minor) {
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const GpuFixture& g = PhysicalGpu(d).gpu;
  *major = g.cc_major;
  *minor = g.cc_minor;
  return NVML_SUCCESS;
}

// nvmlDeviceGetTopologyCommonAncestor from the fixture's switches, host
// bridges and NUMA nodes.
template <class Node>
nvmlReturn_t AnswerCommonAncestor(const Node& a, const Node& b, nvmlGpuTopologyLevel_t* level) {
  if (level == nullptr || a.is_mig || b.is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  const GpuFixture& ga = a.gpu;
  const GpuFixture& gb = b.gpu;
  if (&a == &b) {
    *level = NVML_TOPOLOGY_INTERNAL;
  } else if (ga.pcie_switch >= 0 && ga.pcie_switch == gb.pcie_switch) {
    *level = NVML_TOPOLOGY_SINGLE;
  } else if (ga.host_bridge >= 0 && ga.host_bridge == gb.host_bridge) {
    *level = NVML_TOPOLOGY_HOSTBRIDGE;
  } else if (ga.numa_node == gb.numa_node) {
    *level = NVML_TOPOLOGY_NODE;
  } else {
    *level = NVML_TOPOLOGY_SYSTEM;
  }
  return NVML_SUCCESS;
}

template <class Node>
nvmlReturn_t AnswerNvLinkState(const Node& d, unsigned link, nvmlEnableState_t* active) {
  if (active == nullptr || d.is_mig || link >= d.link_peer.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (std::all_of(d.link_peer.begin(), d.link_peer.end(), [](int p) { return p < 0; })) {
    return NVML_ERROR_NOT_SUPPORTED;  // a PCIe-only board
  }
  *active = d.link_peer[link] >= 0 && !LinkDown(d.gpu, link) ? NVML_FEATURE_ENABLED
                                                             : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

template <class Node>
nvmlReturn_t AnswerAttributes(const Node& d, nvmlDeviceAttributes_t* attrs) {
  if (attrs == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(attrs, 0, sizeof *attrs);
  if (d.is_mig) {
    attrs->multiprocessorCount = d.mig.multiprocessors;
    attrs->gpuInstanceSliceCount = d.mig.gpu_instance_slices;
    attrs->computeInstanceSliceCount = d.mig.compute_instance_slices;
    attrs->memorySizeMB = d.mig.memory_mib;
    attrs->sharedCopyEngineCount = d.mig.gpu_instance_slices;
    attrs->sharedDecoderCount = d.mig.decoders;
    attrs->sharedEncoderCount = d.mig.encoders;
    attrs->sharedJpegCount = d.mig.jpegs;
    attrs->sharedOfaCount = d.mig.ofas;
  } else {
    attrs->multiprocessorCount = 132;
    attrs->gpuInstanceSliceCount = 7;
    attrs->computeInstanceSliceCount = 7;
    attrs->memorySizeMB = d.gpu.memory_mib;
    attrs->sharedCopyEngineCount = 7;
  }
  return NVML_SUCCESS;
}

// A GPU-instance profile of a MIG-enabled GPU (compute capability 8.0+).
template <class Node>
nvmlReturn_t FindProfile(const Node& d, unsigned profile, const ProfileFixture** out) {
  if (d.is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (d.gpu.cc_major < 8 || !d.gpu.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (profile > 16) return NVML_ERROR_INVALID_ARGUMENT;  // past R590's profile count
  for (const auto& p : d.gpu.mig_profiles) {
    if (p.profile == profile) {
      *out = &p;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_SUPPORTED;  // a profile this GPU does not offer
}

// The fields both profile-info structs share.
template <typename Info>
void FillProfile(const ProfileFixture& p, Info* info) {
  info->id = p.id;
  info->isP2pSupported = 0;
  info->sliceCount = p.slices;
  info->instanceCount = p.instances;
  info->multiprocessorCount = p.multiprocessors;
  info->copyEngineCount = p.slices;
  info->decoderCount = p.decoders;
  info->encoderCount = p.encoders;
  info->jpegCount = p.jpegs;
  info->ofaCount = p.ofas;
  info->memorySizeMB = p.memory_mib;
}

}  // namespace fake_nvml

#endif  // GPU_AGENT_TESTS_DOUBLES_NVML_DEVICE_ANSWERS_H_
