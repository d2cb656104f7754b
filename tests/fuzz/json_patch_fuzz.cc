// JSON pointer escaping (RFC 6901) and JSON patch documents (RFC 6902): for
// any tokens and values, the pointer unescapes back to the tokens and the
// patch parses back to the operations it was built from.
//
// Input: NUL-separated fields; each becomes a pointer token and a value.
#include <rapidjson/document.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "apiserver/json_patch.h"
#include "fuzz_support.h"

using namespace gpu_agent;
using namespace gpu_agent::apiserver;

namespace {

// RFC 6901 section 4: "~1" -> "/", then "~0" -> "~"; nullopt on a bad escape.
std::optional<std::vector<std::string>> Unescape(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer.front() != '/') return std::nullopt;
  for (std::string_view raw : fuzz::Split(pointer.substr(1), '/')) {
    std::string t;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '~') {
        t.push_back(raw[i]);
        continue;
      }
      if (i + 1 == raw.size() || (raw[i + 1] != '0' && raw[i + 1] != '1')) return std::nullopt;
      t.push_back(raw[++i] == '0' ? '~' : '/');
    }
    tokens.push_back(std::move(t));
  }
  return tokens;
}

std::string_view StringOf(const rapidjson::Value& v) {
  fuzz::Check(v.IsString(), "not a string");
  return {v.GetString(), v.GetStringLength()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> fields = fuzz::Split(fuzz::AsView(data, size), '\0', 16);
  std::string pointer;
  for (std::string_view f : fields) pointer += "/" + EscapePointerToken(f);
  const std::optional<std::vector<std::string>> back = Unescape(pointer);
  fuzz::Check(back.has_value(), "an escaped pointer has a bad escape");
  fuzz::Check(back->size() == fields.size(), "the pointer has another number of tokens");
  for (size_t i = 0; i < fields.size(); ++i) {
    fuzz::Check((*back)[i] == fields[i], "a token does not unescape to itself");
  }
  if (fields.size() <= 3) {
    std::vector<std::string_view> t(fields.begin(), fields.end());
    t.resize(3);
    fuzz::Check(JsonPointer({t[0], t[1], t[2]}) == "/" + EscapePointerToken(t[0]) + "/" +
                                                       EscapePointerToken(t[1]) + "/" +
                                                       EscapePointerToken(t[2]),
                "JsonPointer differs from escaped tokens joined");
  }

  // One operation per field, kind chosen by the field's length.
  JsonPatch patch;
  struct Want {
    std::string op, path;
    std::optional<std::string> value;
    std::map<std::string, std::string> members;
    bool object = false;
  };
  std::vector<Want> want;
  for (std::string_view f : fields) {
    const std::string path = JsonPointer({"status", f});
    const std::string value(f);
    switch (f.size() % 5) {
      case 0:
        patch.Test(path, value);
        want.push_back({"test", path, value, {}, false});
        break;
      case 1:
        patch.Add(path, value);
        want.push_back({"add", path, value, {}, false});
        break;
      case 2:
        patch.Replace(path, value);
        want.push_back({"replace", path, value, {}, false});
        break;
      case 3:
        patch.Remove(path);
        want.push_back({"remove", path, std::nullopt, {}, false});
        break;
      default: {
        std::map<std::string, std::string> members = {{value, value}, {"k", value}};
        patch.AddObject(path, members);
        want.push_back({"add", path, std::nullopt, members, true});
      }
    }
  }
  const std::string json = patch.ToJson();
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  fuzz::Check(!doc.HasParseError() && doc.IsArray(), "the patch is not a JSON array");
  fuzz::Check(doc.Size() == want.size(), "the patch has another number of operations");
  for (rapidjson::SizeType i = 0; i < doc.Size(); ++i) {
    const rapidjson::Value& op = doc[i];
    const Want& w = want[i];
    fuzz::Check(op.IsObject(), "an operation is not an object");
    fuzz::Check(StringOf(op["op"]) == w.op, "op differs");
    fuzz::Check(StringOf(op["path"]) == w.path, "path differs");
    if (w.value) {
      fuzz::Check(StringOf(op["value"]) == *w.value, "value differs");
    } else if (w.object) {
      const rapidjson::Value& v = op["value"];
      fuzz::Check(v.IsObject() && v.MemberCount() == w.members.size(), "object value differs");
      for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
        auto it = w.members.find(std::string(StringOf(m->name)));
        fuzz::Check(it != w.members.end() && it->second == StringOf(m->value),
                    "object member differs");
      }
    } else {
      fuzz::Check(!op.HasMember("value"), "remove with a value");
    }
  }
  return 0;
}
