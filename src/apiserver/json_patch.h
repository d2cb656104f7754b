// RFC 6901 JSON pointers and RFC 6902 JSON patches, built as data and
// serialised by RapidJSON, never pasted together as strings.
#ifndef GPU_AGENT_APISERVER_JSON_PATCH_H_
#define GPU_AGENT_APISERVER_JSON_PATCH_H_

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpu_agent::apiserver {

// One reference token: "~" -> "~0", "/" -> "~1" (in that order).
std::string EscapePointerToken(std::string_view token);
// "/" + escaped tokens joined by "/": {"status","capacity","nvidia.com/gpu"}
// -> "/status/capacity/nvidia.com~1gpu".
std::string JsonPointer(std::initializer_list<std::string_view> tokens);

class JsonPatch {
 public:
  void Test(std::string path, std::string value);
  void Add(std::string path, std::string value);
  void AddObject(std::string path, std::map<std::string, std::string> members);
  void Replace(std::string path, std::string value);
  void Remove(std::string path);
  // Appends every operation of `other`.
  void Append(const JsonPatch& other);

  bool empty() const { return ops_.empty(); }
  // True when the patch starts with a test: applied twice, the second
  // attempt fails that test instead of changing anything, so a request whose
  // answer was lost may be sent again.
  bool guarded() const { return !ops_.empty() && ops_.front().op == "test"; }
  size_t size() const { return ops_.size(); }
  // The patch document: a JSON array of operations.
  std::string ToJson() const;

 private:
  struct Op {
    std::string op;
    std::string path;
    bool has_value = false;
    bool object = false;
    std::string value;
    std::map<std::string, std::string> members;
  };
  std::vector<Op> ops_;
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_JSON_PATCH_H_
