#include "base/json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent::json {

int NestingDepth(std::string_view text, int stop_past) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > stop_past) return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string DescribeOffset(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return StrCat("line ", line, ", column ", col);
}

absl::Status Parse(std::string_view text, std::string_view what, rapidjson::Document* doc,
                   const Limits& limits) {
  doc->SetNull();
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        StrCat(what, " of ", text.size(), " bytes is over the ", limits.max_bytes, "-byte limit"));
  }
  // Counted before the parse builds anything: a document of 200,000 '['
  // is refused in one pass over its bytes.
  if (NestingDepth(text, limits.max_depth) > limits.max_depth) {
    return absl::InvalidArgumentError(
        StrCat(what, " nests arrays and objects deeper than ", limits.max_depth, " levels"));
  }
  doc->Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (doc->HasParseError()) {
    const std::string why =
        StrCat(what, " is not valid JSON (", rapidjson::GetParseError_En(doc->GetParseError()),
               " at ", DescribeOffset(text, doc->GetErrorOffset()), ")");
    doc->SetNull();
    return absl::InvalidArgumentError(why);
  }
  return absl::OkStatus();
}

const rapidjson::Value* Member(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(key);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

std::string String(const rapidjson::Value& v, const char* key) {
  const rapidjson::Value* m = Member(v, key);
  return m != nullptr && m->IsString() ? std::string(m->GetString(), m->GetStringLength()) : "";
}

std::vector<std::string> Strings(const rapidjson::Value* v) {
  std::vector<std::string> out;
  if (v == nullptr || !v->IsArray()) return out;
  for (const auto& s : v->GetArray()) {
    if (s.IsString()) out.emplace_back(s.GetString(), s.GetStringLength());
  }
  return out;
}

std::string Serialize(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string MessageOf(std::string_view body, size_t max) {
  json::Document d;
  if (Parse(body, "", &d).ok()) {
    if (std::string m = String(d, "message"); !m.empty()) return m;
  }
  return Printable(body, max);
}

}  // namespace gpu_agent::json
