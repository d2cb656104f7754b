// What static mode needs from a Node object, parsed from the API server's
// JSON with an iterative (stack-free) parser and a size cap, and the patch
// that moves it to a desired capacity.
#ifndef GPU_AGENT_APISERVER_NODE_H_
#define GPU_AGENT_APISERVER_NODE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "apiserver/json_patch.h"

namespace gpu_agent::apiserver {

inline constexpr size_t kMaxObjectBytes = 8u << 20;

struct NodeView {
  std::string name;
  std::string resource_version;
  bool has_status = false;
  bool has_capacity = false;
  bool has_allocatable = false;
  std::map<std::string, std::string> capacity;
  std::map<std::string, std::string> allocatable;
  bool has_labels = false;       // metadata.labels is there (maybe empty)
  bool has_annotations = false;  // metadata.annotations is there
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::set<std::string> condition_types;  // status.conditions[].type

  std::optional<std::string> Capacity(const std::string& r) const;
  std::optional<std::string> Allocatable(const std::string& r) const;
};

// Parses a Node. Errors say what is wrong and where (line:column of the
// body), and refuse bodies over kMaxObjectBytes.
absl::StatusOr<NodeView> ParseNode(std::string_view json);

// A LIST of Nodes: the collection's resourceVersion is the revision the
// server was at when it answered (a watch may start there); an item's own
// version is only the revision of its last change, which a quiet object
// keeps until it falls out of the server's watch window.
struct NodeList {
  std::string resource_version;
  std::vector<NodeView> items;
};
absl::StatusOr<NodeList> ParseNodeList(std::string_view json);

// One line of a watch stream.
struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kError;
  NodeView node;                 // kAdded, kModified, kDeleted
  std::string resource_version;  // all but kError: where the next watch may start
  int code = 0;                  // kError: the Status code (410: the version is too old)
  std::string message;           // kError: the server's message
};
absl::StatusOr<WatchEvent> ParseWatchEvent(std::string_view line);

// Extended resource -> count.
using Capacities = std::map<std::string, int64_t>;

// The patch that makes every resource of `want` equal its value in
// status.capacity (and status.allocatable when `allocatable`), in one
// request; see PlanSetCapacity.
JsonPatch PlanSetCapacities(const NodeView& node, const Capacities& want, bool allocatable);
// The patch that removes `resources` from capacity (and allocatable).
JsonPatch PlanRemoveCapacities(const NodeView& node, const std::set<std::string>& resources,
                               bool allocatable);

// The patch that makes `resource` equal `value` in status.capacity (and
// status.allocatable when `allocatable`), creating a missing parent object.
// Starts with a test of metadata.resourceVersion, so it applies only to the
// version it was planned against. Empty when nothing needs to change.
JsonPatch PlanSetCapacity(const NodeView& node, const std::string& resource, int64_t value,
                          bool allocatable);
// The patch that removes `resource` from capacity (and allocatable). Empty
// when it is not there.
JsonPatch PlanRemoveCapacity(const NodeView& node, const std::string& resource, bool allocatable);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_NODE_H_
