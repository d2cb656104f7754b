#include "apiserver/node_condition.h"

#include <rapidjson/stringbuffer.h>

#include <ctime>
#include <string_view>

#include "base/json.h"

namespace gpu_agent::apiserver {

std::string NodeConditionPatch(const NodeCondition& c) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  auto field = [&w](const char* key, std::string_view value) { json::WriteField(w, key, value); };
  w.StartObject();
  w.Key("status");
  w.StartObject();
  w.Key("conditions");
  w.StartArray();
  w.StartObject();
  field("type", c.type);
  field("status", c.status);
  field("reason", c.reason);
  field("message", c.message);
  field("lastHeartbeatTime", c.heartbeat);
  field("lastTransitionTime", c.transition);
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return json::TextOf(buf);
}

std::string Rfc3339Now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gpu_agent::apiserver
