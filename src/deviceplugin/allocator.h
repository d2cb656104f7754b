// Builds Allocate responses: validates the requested IDs against the current
// snapshot and describes the devices to the container runtime per the
// configured device-list strategies.
#ifndef GPU_AGENT_DEVICEPLUGIN_ALLOCATOR_H_
#define GPU_AGENT_DEVICEPLUGIN_ALLOCATOR_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "deviceplugin/api.pb.h"
#include "deviceplugin/device_publisher.h"

namespace gpu_agent::deviceplugin {

// How Allocate hands devices to a container (flags.plugin.deviceListStrategy),
// any of them together.
struct DeviceListStrategies {
  bool envvar = true;
  bool volume_mounts = false;
  bool cdi_annotations = false;
  bool cdi_cri = false;

  bool Cdi() const { return cdi_annotations || cdi_cri; }
  // From the setting's names ("envvar", "volume-mounts", "cdi-annotations",
  // "cdi-cri"); nullopt when one is none of them.
  static std::optional<DeviceListStrategies> Parse(const std::vector<std::string>& names);
};

struct AllocateOptions {
  DeviceListStrategies device_list;
  bool pass_device_specs = false;
  // The root of /dev/nvidia* as the host sees it: a DeviceSpec's host_path is
  // the runtime's to open, on the host.
  std::string dev_root = "/";
  // The same root as this process sees it, where nodes are checked for
  // (differs in a container that mounts the host's root elsewhere). Empty:
  // dev_root.
  std::string dev_root_here;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  // CDI vendor/class: the kind of the spec the agent writes (cdi.vendor,
  // cdi.class), so every name Allocate gives is defined there.
  std::string cdi_kind = "gpu-agent.github.io/gpu";
  bool fail_requests_greater_than_one = false;
};

inline constexpr const char* kVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES";
inline constexpr const char* kVolumeMountRoot = "/var/run/nvidia-container-devices";

class Allocator {
 public:
  // Checks once which driver device nodes exist under the dev root, so each
  // Allocate call touches no file system. Thread-safe after construction.
  explicit Allocator(AllocateOptions options);

  // Fills `out` for one container. kInvalidArgument names unknown, unhealthy
  // or duplicate IDs, an empty request, or a refused multi-replica request.
  absl::Status AllocateContainer(const DeviceSnapshot& snap,
                                 const v1beta1::ContainerAllocateRequest& request,
                                 v1beta1::ContainerAllocateResponse* out) const;

  const AllocateOptions& options() const { return options_; }

 private:
  // "<prefix>gpu-agent_<class>_<16 hex digits>", unique per resource and
  // request.
  std::string CdiAnnotationKey(const std::string& resource,
                               const v1beta1::ContainerAllocateRequest& request) const;
  std::string HostPath(const std::string& dev_path) const;

  const AllocateOptions options_;
  std::vector<std::string> control_nodes_;  // present driver-wide nodes
  std::string dev_root_;                    // TrimRoot form
  std::string dev_root_here_;               // TrimRoot form
};

// "a, b, c and 7 more" for error messages.
std::string ListIds(const std::vector<std::string>& ids, size_t max = 10);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_ALLOCATOR_H_
