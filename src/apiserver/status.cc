#include "apiserver/status.h"

#include <rapidjson/document.h>

#include "base/json.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {

ApiStatus ReadStatus(std::string_view json, size_t max_message) {
  ApiStatus out;
  json::Document d;
  if (json::Parse(json, "", &d).ok() && d.IsObject()) {
    const rapidjson::Value* code = json::Member(d, "code");
    out.code = code != nullptr && code->IsInt() ? code->GetInt() : 0;
    out.reason = json::String(d, "reason");
  }
  out.message = json::MessageOf(json, max_message);
  return out;
}

std::string StatusMessage(const HttpResponse& r) {
  return StrCat(r.status, ": ", ReadStatus(r.body).message);
}

}  // namespace gpu_agent::apiserver
