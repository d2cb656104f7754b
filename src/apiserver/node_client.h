// Reads and patches one Node, turning every API server answer into a status
// an operator can act on.
#ifndef GPU_AGENT_APISERVER_NODE_CLIENT_H_
#define GPU_AGENT_APISERVER_NODE_CLIENT_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "apiserver/json_patch.h"
#include "apiserver/node.h"
#include "apiserver/rest_client.h"

namespace gpu_agent::apiserver {

inline constexpr const char* kJsonPatchType = "application/json-patch+json";

// Maps an API server answer to a status. Codes: 401 kUnauthenticated, 403
// kPermissionDenied (naming the RBAC rule), 404 kNotFound (naming the node),
// 409 kAborted (re-read and retry), 422 kInvalidArgument (the server's
// message, what was sent, and the likely cause), 429 and 5xx kUnavailable.
// A 403 that refuses label keys (NodeRestriction, or an admission policy)
// carries the payload kLabelsRefusedPayload: IsLabelRefusal tells it from a
// missing RBAC rule.
absl::Status ExplainAnswer(const HttpResponse& r, const std::string& node, const std::string& verb,
                           const std::string& sent);
inline constexpr const char* kLabelsRefusedPayload = "gpu-agent/labels-refused";
bool IsLabelRefusal(const absl::Status& s);

class NodeClient {
 public:
  NodeClient(RestClient* rest, std::string node) : rest_(rest), node_(std::move(node)) {}

  absl::StatusOr<NodeView> Get();
  // GET /api/v1/nodes?fieldSelector=metadata.name=<node>&resourceVersion=0:
  // the Node (none when it does not exist) and the version to watch from.
  absl::StatusOr<NodeList> List();
  // PATCH /api/v1/nodes/<node>/status with a JSON patch; the patched Node.
  absl::StatusOr<NodeView> PatchStatus(const JsonPatch& patch);

  struct Applied {
    NodeView before;  // the Node the final plan was made from
    NodeView after;   // equals `before` when nothing was sent
    bool patched = false;
  };
  // Reads the Node (or starts from `start`), plans with `plan` and sends the
  // patch; an empty plan sends nothing. The Node moving on in between (409,
  // or a 422 after which its resourceVersion changed: the plan's test
  // failed) means read, plan and send again, a few times at most.
  absl::StatusOr<Applied> Apply(const std::function<JsonPatch(const NodeView&)>& plan,
                                std::optional<NodeView> start = std::nullopt);

  // PATCH requests sent by this client, answered or not.
  uint64_t patches_sent() const { return patches_sent_; }

  std::string StatusPath() const;
  std::string NodePath() const;
  std::string ListPath() const;
  // A watch of this Node from `version` (none: from now, the current object
  // first), ended by the server after `timeout`, with bookmarks.
  std::string WatchPath(const std::string& version, std::chrono::seconds timeout) const;
  const std::string& node() const { return node_; }

 private:
  RestClient* rest_;
  const std::string node_;
  uint64_t patches_sent_ = 0;
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_NODE_CLIENT_H_
