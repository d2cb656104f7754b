// What the kubelet says running pods hold: its PodResources API (v1 List)
// on <kubelet root>/pod-resources/kubelet.sock, read into plain records.
// While a node moves between the device plugin and DRA, this is how the
// agent knows which GPUs the other side still has given to a pod: device
// plugin devices by resource name and ID, DRA claims' devices by driver,
// pool and device name.
//
// An answer is checked before it is used: a pod without a name, a device
// list without a resource name or with an empty ID, a claim device without
// driver or device name is an error that names the pod and container, so
// that a GPU of unknown state is never taken for free.
#ifndef GPU_AGENT_PODRESOURCES_POD_RESOURCES_H_
#define GPU_AGENT_PODRESOURCES_POD_RESOURCES_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace v1 {
class ListPodResourcesResponse;
}  // namespace v1

namespace gpu_agent::podresources {

// One device-plugin device a container holds.
struct HeldDevice {
  std::string pod;  // "namespace/name"
  std::string container;
  std::string resource;  // "nvidia.com/gpu"
  std::string id;        // the ID the plugin's Allocate was given
  friend bool operator==(const HeldDevice&, const HeldDevice&) = default;
};

// One device of a DRA claim a container uses.
struct HeldClaimDevice {
  std::string pod;  // "namespace/name"
  std::string container;
  std::string claim;  // "namespace/name"
  std::string driver;
  std::string pool;
  std::string device;
  std::string share_id;  // "" when the device is not shared
  friend bool operator==(const HeldClaimDevice&, const HeldClaimDevice&) = default;
};

struct PodResources {
  std::vector<HeldDevice> devices;
  std::vector<HeldClaimDevice> claim_devices;
  size_t pods = 0;  // pods listed, holding anything or not
};

// The records of a List answer, checked as above.
absl::StatusOr<PodResources> FromListResponse(const v1::ListPodResourcesResponse& response);

// The default socket under a kubelet root ("/var/lib/kubelet").
std::string DefaultSocket(const std::string& kubelet_root);

// Asks the kubelet at `socket` (v1 List) within `deadline`. Errors say
// which socket and what failed: not there, no answer in time, an answer
// that is not PodResources, or one that fails the checks above.
absl::StatusOr<PodResources> List(const std::string& socket, std::chrono::milliseconds deadline);

}  // namespace gpu_agent::podresources

#endif  // GPU_AGENT_PODRESOURCES_POD_RESOURCES_H_
