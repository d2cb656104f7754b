// An Allocate answer as one line of protobuf text, the way the full
// runtime's ShortDebugString() writes it (fields in number order, map
// entries by key, default values left out, strings C-escaped). The agent is
// built with the lite runtime, which has no text format: the tests compare
// answers against this text, and the kubelet simulator logs it
// (scripts/gpu-check.sh reads the log).
#ifndef GPU_AGENT_TESTS_DOUBLES_KUBELET_ALLOCATE_TEXT_H_
#define GPU_AGENT_TESTS_DOUBLES_KUBELET_ALLOCATE_TEXT_H_

#include <string>

#include "deviceplugin/api.pb.h"

namespace gpu_agent::testing {

std::string AllocateText(const v1beta1::ContainerAllocateResponse& r);
std::string AllocateText(const v1beta1::AllocateResponse& r);

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_DOUBLES_KUBELET_ALLOCATE_TEXT_H_
