// JSON from outside the process (the API server, the kubelet's claims, files
// in folders another user could write, a plugin's output), parsed so that no
// input can crash the agent: RapidJSON's iterative parser (its recursive one
// overflows the stack on deep nesting), a cap on size, and a cap on nesting,
// so that the walks after the parse that recurse (comparison, Writer,
// copies) stay shallow. And the few accessors every reader of it uses.
#ifndef GPU_AGENT_BASE_JSON_H_
#define GPU_AGENT_BASE_JSON_H_

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gpu_agent::json {

// The API server's own answers stay far inside both: an object's body is
// at most about 1.5 MiB (etcd's limit), and Kubernetes objects nest about 20
// deep (a ResourceClaim's opaque parameters, which users write, a few more).
inline constexpr size_t kMaxBytes = 8u << 20;
inline constexpr int kMaxDepth = 128;

struct Limits {
  size_t max_bytes = kMaxBytes;
  int max_depth = kMaxDepth;
};

namespace internal {
struct SmallChunks {
  rapidjson::MemoryPoolAllocator<> pool{4096};
};
}  // namespace internal

// A document whose memory comes 4 KiB at a time. RapidJSON's own takes
// 64 KiB at once whatever it holds, so each ResourceSlice, claim or watch
// event of a few kB parsed held 64 KiB, and the slice publisher holds
// several at once (bench/RESULTS.md, "Footprint: the code each mode runs,
// laid out together"). Its allocator is a base initialised before the
// document's and destroyed after it. Neither copied nor moved: the
// document's values point into its allocator.
class Document : private internal::SmallChunks, public rapidjson::Document {
 public:
  Document() : rapidjson::Document(&pool) {}
  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;
};

// Parses `text` into `doc`. Errors (InvalidArgument) start with `what` and
// say why: over `max_bytes`, nested deeper than `max_depth`, or invalid JSON
// with RapidJSON's reason and its line and column. Never recurses on the
// input. `doc` holds a value only when the status is OK.
absl::Status Parse(std::string_view text, std::string_view what, rapidjson::Document* doc,
                   const Limits& limits = {});

// How deep arrays and objects nest in `text`, counting no further than
// `stop_past` + 1. Strings are skipped; on text that is not JSON the figure
// is still an upper bound for what a parser would build.
int NestingDepth(std::string_view text, int stop_past);

// "line L, column C" (1-based) of byte `offset` in `text`.
std::string DescribeOffset(std::string_view text, size_t offset);

// `key` of object `v`; null when `v` is no object or has no such member.
const rapidjson::Value* Member(const rapidjson::Value& v, const char* key);
// The string at `key` of object `v`; "" when there is none.
std::string String(const rapidjson::Value& v, const char* key);
// The strings of array `v` (other items skipped); none when `v` is null or
// no array.
std::vector<std::string> Strings(const rapidjson::Value* v);
// `v` as compact JSON text.
std::string Serialize(const rapidjson::Value& v);

// What the project writes JSON text with.
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
// `s` as a JSON string (a key's or a value's), whatever bytes it holds.
inline void WriteString(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}
// "key": "value", inside an object being written.
inline void WriteField(Writer& w, const char* key, std::string_view value) {
  w.Key(key);
  WriteString(w, value);
}
// The text `buf` holds.
inline std::string TextOf(const rapidjson::StringBuffer& buf) {
  return std::string(buf.GetString(), buf.GetSize());
}

// The `message` of a JSON object body (a Kubernetes Status: what the API
// server answers a refusal with), else the body's start as printable text
// (base/text's Printable, at most `max` bytes).
std::string MessageOf(std::string_view body, size_t max = 200);

}  // namespace gpu_agent::json

#endif  // GPU_AGENT_BASE_JSON_H_
