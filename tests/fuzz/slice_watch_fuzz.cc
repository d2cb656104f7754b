// A ResourceSlice watch body as the API server (or something in its place)
// sends it: lines split by LineBuffer, each read by ParseSliceWatchEvent,
// the DRA publisher's reader. Nothing may crash, recurse past base/json's
// depth, or hand back an object that does not read back within the same
// bounds.
//
// Input: the body.
#include <rapidjson/document.h>

#include <string>

#include "apiserver/line_buffer.h"
#include "base/json.h"
#include "dra/slice_set.h"
#include "fuzz_support.h"

using namespace gpu_agent;
using namespace gpu_agent::apiserver;
using namespace gpu_agent::dra;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body = fuzz::AsView(data, size);
  LineBuffer buffer;
  buffer.Append(body);
  buffer.Append("\n");  // the last line too
  while (std::optional<std::string> line = buffer.NextLine()) {
    absl::StatusOr<SliceWatchEvent> ev = ParseSliceWatchEvent(*line);
    if (!ev.ok()) {
      fuzz::Check(!ev.status().message().empty(), "a refused event without a message");
      continue;
    }
    fuzz::Check(json::NestingDepth(*line, json::kMaxDepth) <= json::kMaxDepth,
                "an event nested past the limit was taken");
    fuzz::Check(!ev->type.empty(), "an event without a type was taken");
    rapidjson::Document again;
    fuzz::Check(json::Parse(ev->object, "object", &again).ok() && again.IsObject(),
                "an event's object does not read back");
    if (ev->type == "ERROR") {
      fuzz::Check(ev->name.empty(), "an ERROR event named a slice");
    }
  }
  return 0;
}
