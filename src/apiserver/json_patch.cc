#include "apiserver/json_patch.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace gpu_agent::apiserver {

std::string EscapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 4);
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string JsonPointer(std::initializer_list<std::string_view> tokens) {
  std::string out;
  for (std::string_view t : tokens) {
    out.push_back('/');
    out += EscapePointerToken(t);
  }
  return out;
}

void JsonPatch::Test(std::string path, std::string value) {
  ops_.push_back({"test", std::move(path), true, false, std::move(value), {}});
}
void JsonPatch::Add(std::string path, std::string value) {
  ops_.push_back({"add", std::move(path), true, false, std::move(value), {}});
}
void JsonPatch::AddObject(std::string path, std::map<std::string, std::string> members) {
  ops_.push_back({"add", std::move(path), true, true, "", std::move(members)});
}
void JsonPatch::Replace(std::string path, std::string value) {
  ops_.push_back({"replace", std::move(path), true, false, std::move(value), {}});
}
void JsonPatch::Remove(std::string path) {
  ops_.push_back({"remove", std::move(path), false, false, "", {}});
}

void JsonPatch::Append(const JsonPatch& other) {
  ops_.insert(ops_.end(), other.ops_.begin(), other.ops_.end());
}

std::string JsonPatch::ToJson() const {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartArray();
  for (const Op& op : ops_) {
    w.StartObject();
    w.Key("op");
    w.String(op.op.c_str(), static_cast<rapidjson::SizeType>(op.op.size()));
    w.Key("path");
    w.String(op.path.c_str(), static_cast<rapidjson::SizeType>(op.path.size()));
    if (op.has_value) {
      w.Key("value");
      if (op.object) {
        w.StartObject();
        for (const auto& [k, v] : op.members) {
          w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
          w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
        }
        w.EndObject();
      } else {
        w.String(op.value.c_str(), static_cast<rapidjson::SizeType>(op.value.size()));
      }
    }
    w.EndObject();
  }
  w.EndArray();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace gpu_agent::apiserver
