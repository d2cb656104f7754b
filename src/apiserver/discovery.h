// API group discovery: which versions of a group the API server serves, as
// GET /apis/<group> answers (an APIGroup object).
#ifndef GPU_AGENT_APISERVER_DISCOVERY_H_
#define GPU_AGENT_APISERVER_DISCOVERY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "apiserver/rest_client.h"

namespace gpu_agent::apiserver {

// The first of `preferred` that the APIGroup `body` lists under
// `versions[].version`. Errors: the body is not an APIGroup (bounded parse,
// base/json), or it serves none of them (the message lists `preferred`).
absl::StatusOr<std::string> PickServedVersion(std::string_view body, std::string_view group,
                                              const std::vector<std::string>& preferred);

// The version of resource.k8s.io to use, the first of v1, v1beta2 and
// v1beta1 the server serves (their shapes are alike where the agent reads
// and writes them): GET /apis/resource.k8s.io. Errors (Unavailable): no
// answer, the group not served (DRA needs Kubernetes 1.32 or later), none
// of the three served; each says what the server answered.
absl::StatusOr<std::string> DiscoverResourceApiVersion(RestClient* rest);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_DISCOVERY_H_
