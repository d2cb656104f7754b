// The claim the 1.36 scheduler makes for a pod that asks, in its resource
// limits, for an extended resource a DeviceClass names in
// extendedResourceName (nvidia.com/gpu with no claim in the pod spec), and
// what the kubelet hands each container from it. Read from
// pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go
// (createRequestsAndMappings, createResourceRequestAndMappings) and
// pkg/kubelet/cm/dra/manager.go (GetResources), and seen on a real 1.36
// node (notes/extended-claim*.yaml):
//  - one claim for the pod, "<pod>-extended-resources-<suffix>", annotated
//    resource.kubernetes.io/extended-resource-claim: "true", owned by the
//    pod, reserved for it;
//  - one request per container and resource, named
//    "container-<i>-request-<j>": i the container's index in init
//    containers followed by containers, j the resource's index among ALL
//    the container's requests (cpu and memory too) sorted by name; an
//    ExactCount request of the class, for the container's quantity;
//  - pod.status.extendedResourceClaimStatus maps (container, resource) to
//    the request; the kubelet gives a container the CDI devices of the
//    requests mapped to it, and nothing of the others.
#ifndef GPU_AGENT_TESTS_KUBELET_EXTENDED_RESOURCE_CLAIM_H_
#define GPU_AGENT_TESTS_KUBELET_EXTENDED_RESOURCE_CLAIM_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dra/claim_handler.h"

namespace gpu_agent::testing {

struct PodContainer {
  std::string name;
  // Every request of the container (its limits where requests are not
  // given), by resource name: the extended ones are counted, all of them
  // name the requests.
  std::map<std::string, int64_t> requests;
};

struct ExtendedRequestMapping {
  std::string container;
  std::string resource;
  std::string request;
  friend bool operator==(const ExtendedRequestMapping&, const ExtendedRequestMapping&) = default;
};

struct ExtendedPod {
  std::string name_space, name, uid;
  std::vector<PodContainer> init_containers, containers;
};

struct ExtendedClaim {
  std::string name;  // "<pod>-extended-resources-<suffix>"
  std::string uid;
  std::string json;                              // the allocated ResourceClaim, resource.k8s.io/v1
  std::vector<ExtendedRequestMapping> mappings;  // the pod's extendedResourceClaimStatus
  std::vector<std::string> request_names;        // in the claim's order
};

// "container-<index>-request-<j>" for `resource` of a container with these
// requests.
std::string ExtendedRequestName(size_t index, const std::map<std::string, int64_t>& requests,
                                const std::string& resource);

// The claim for `pod`: a request for each container's resource that
// `classes` (resource name -> DeviceClass) maps, allocated from `devices`
// (driver's devices in `pool`) in order, each request taking as many as it
// counts. Containers whose resources no class maps get nothing.
ExtendedClaim MakeExtendedClaim(const ExtendedPod& pod, const std::string& uid,
                                const std::map<std::string, std::string>& classes,
                                const std::string& driver, const std::string& pool,
                                const std::vector<std::string>& devices);

// The CDI ids the kubelet hands `container` from the prepared claim: those
// of the requests the mappings give it for a resource it asks for.
std::vector<std::string> ExtendedContainerCdiIds(
    const dra::PrepareOutcome& claim, const std::vector<ExtendedRequestMapping>& mappings,
    const PodContainer& container);

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_KUBELET_EXTENDED_RESOURCE_CLAIM_H_
