// What the API server sends about a Node: the object (GET, PATCH answer),
// the LIST, and one watch event line; then the patches planned from the
// parsed Node, which must be well-formed JSON patches.
#include <rapidjson/document.h>

#include "apiserver/node.h"
#include "base/json.h"
#include "fuzz_support.h"

using namespace gpu_agent;
using namespace gpu_agent::apiserver;

namespace {

void CheckPatch(const JsonPatch& patch) {
  const std::string json = patch.ToJson();
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  fuzz::Check(!doc.HasParseError() && doc.IsArray(), "a planned patch is not a JSON array");
  fuzz::Check(doc.Size() == patch.size(), "a planned patch lost operations");
  for (const rapidjson::Value& op : doc.GetArray()) {
    fuzz::Check(op.IsObject() && op.HasMember("op") && op.HasMember("path"),
                "a patch operation without op or path");
  }
}

void Plan(const NodeView& node) {
  const Capacities want = {{"nvidia.com/gpu", 4}, {"nvidia.com/mig-1g.10gb", 0}};
  for (bool allocatable : {false, true}) {
    const JsonPatch set = PlanSetCapacities(node, want, allocatable);
    CheckPatch(set);
    // Starts with the resourceVersion test whenever the Node has one.
    if (!set.empty() && !node.resource_version.empty()) {
      fuzz::Check(set.guarded(), "a patch of a versioned Node without its test");
    }
    CheckPatch(PlanRemoveCapacities(node, {"nvidia.com/gpu", "example.com/x"}, allocatable));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::AsView(data, size);
  if (absl::StatusOr<NodeView> node = ParseNode(text); node.ok()) {
    Plan(*node);
  } else {
    fuzz::Check(!node.status().message().empty(), "error without a message");
  }
  if (absl::StatusOr<NodeList> list = ParseNodeList(text); list.ok()) {
    fuzz::Check(!list->resource_version.empty(), "a NodeList without the version to watch from");
    for (const NodeView& n : list->items) Plan(n);
  }
  if (absl::StatusOr<WatchEvent> ev = ParseWatchEvent(text); ev.ok()) {
    if (ev->type != WatchEvent::Type::kError) {
      fuzz::Check(!ev->resource_version.empty(), "a watch event without a resourceVersion");
    }
    if (ev->type == WatchEvent::Type::kAdded || ev->type == WatchEvent::Type::kModified) {
      Plan(ev->node);
    }
  }
  (void)json::DescribeOffset(text, size / 2);
  return 0;
}
