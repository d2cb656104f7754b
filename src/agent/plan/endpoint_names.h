// The socket file name each advertised resource is served on, in the
// kubelet's device-plugin folder: the configured one for the main resource,
// names derived from the resource for the others, never two alike.
#ifndef GPU_AGENT_AGENT_PLAN_ENDPOINT_NAMES_H_
#define GPU_AGENT_AGENT_PLAN_ENDPOINT_NAMES_H_

#include <string>
#include <vector>

namespace gpu_agent {

// "nvidia.com/mig-1g.10gb" -> "nvidia-mig-1g.10gb.sock": the domain's first
// label, a dash, the name; characters a file name should not carry become '_'.
std::string DerivedEndpoint(const std::string& resource);

// One endpoint per resource, in order. `configured_endpoint` goes to the
// resource named `main_resource`, or to the only resource; the others get
// DerivedEndpoint(), with "-2", "-3", ... added where two would clash.
std::vector<std::string> AssignEndpoints(const std::vector<std::string>& resources,
                                         const std::string& main_resource,
                                         const std::string& configured_endpoint);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_ENDPOINT_NAMES_H_
