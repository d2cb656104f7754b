#include "apiserver/discovery.h"

#include <rapidjson/document.h>

#include <set>

#include "apiserver/status.h"
#include "base/json.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {

absl::StatusOr<std::string> PickServedVersion(std::string_view body, std::string_view group,
                                              const std::vector<std::string>& preferred) {
  json::Document d;
  if (absl::Status s = json::Parse(body, StrCat("the API server's ", group, " APIGroup"), &d);
      !s.ok()) {
    return s;
  }
  std::set<std::string> served;
  if (const rapidjson::Value* v = json::Member(d, "versions"); v != nullptr && v->IsArray()) {
    for (const auto& x : v->GetArray()) {
      if (std::string n = json::String(x, "version"); !n.empty()) served.insert(std::move(n));
    }
  }
  for (const std::string& v : preferred) {
    if (served.count(v) > 0) return v;
  }
  std::string names;
  for (const std::string& v : preferred) StrAppend(&names, names.empty() ? "" : ", ", v);
  return absl::UnavailableError(StrCat(group, " serves none of ", names));
}

absl::StatusOr<std::string> DiscoverResourceApiVersion(RestClient* rest) {
  absl::StatusOr<HttpResponse> r = rest->Get("/apis/resource.k8s.io");
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return absl::UnavailableError(
        StrCat("the API server serves no resource.k8s.io group (GET /apis/resource.k8s.io "
               "answered ",
               StatusMessage(*r), "); DRA needs Kubernetes 1.32 or later"));
  }
  absl::StatusOr<std::string> v =
      PickServedVersion(r->body, "resource.k8s.io", {"v1", "v1beta2", "v1beta1"});
  if (!v.ok()) return absl::UnavailableError(v.status().message());
  return v;
}

}  // namespace gpu_agent::apiserver
