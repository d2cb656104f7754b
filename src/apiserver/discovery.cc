#include "apiserver/discovery.h"

#include <rapidjson/document.h>

#include <set>

#include "base/json.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {

absl::StatusOr<std::string> PickServedVersion(std::string_view body, std::string_view group,
                                              const std::vector<std::string>& preferred) {
  rapidjson::Document d;
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

}  // namespace gpu_agent::apiserver
