#include "dra/slice_refusal.h"

#include "apiserver/status.h"
#include "base/duration.h"
#include "base/strings.h"

namespace gpu_agent::dra {

std::string Refusal(const apiserver::HttpResponse& r, const char* verb,
                    std::chrono::steady_clock::duration forbidden_for,
                    std::chrono::milliseconds for_good) {
  std::string out = apiserver::StatusMessage(r);
  if (r.status != 403) return out;
  if (forbidden_for < for_good) {
    return StrCat(out,
                  " (the API server's authorization refused it; a server that has just started "
                  "does so until it has loaded its RBAC rules)");
  }
  return StrCat(
      out, " (refused for ",
      FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(forbidden_for)),
      " now: the agent's ClusterRole must allow ", verb,
      " on resourceslices of resource.k8s.io; see manifests/dra/agent/rbac.yaml)");
}

}  // namespace gpu_agent::dra
