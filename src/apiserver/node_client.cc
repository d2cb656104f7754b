#include "apiserver/node_client.h"

#include "absl/strings/cord.h"
#include "apiserver/status.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent::apiserver {

absl::Status ExplainAnswer(const HttpResponse& r, const std::string& node, const std::string& verb,
                           const std::string& sent) {
  if (r.status >= 200 && r.status < 300) return absl::OkStatus();
  const std::string msg = ReadStatus(r.body).message;
  switch (r.status) {
    case 401:
      return absl::UnauthenticatedError(
          StrCat("the API server rejected the credentials (401 ", msg,
                 "); the token may be expired or for another cluster (it was re-read once)"));
    case 403:
      // NodeRestriction's words on update and on create.
      if (msg.find("modify labels") != std::string::npos ||
          msg.find("set the following labels") != std::string::npos) {
        absl::Status s = absl::PermissionDeniedError(StrCat(
            "the API server refused the node labels (403: ", msg,
            "). Under the NodeRestriction admission plugin a node's own credentials may not "
            "change kubernetes.io/ or k8s.io/ labels other than the kubelet's, nor any "
            "node-restriction.kubernetes.io/ label; an admission policy may refuse more. The "
            "agent writes only nvidia.com/ keys: allow them, or set nodeLabels.output to nfd or "
            "none"));
        s.SetPayload(kLabelsRefusedPayload, absl::Cord("1"));
        return s;
      }
      return absl::PermissionDeniedError(StrCat(
          "forbidden (403): ", msg,
          ". The agent's identity needs RBAC: apiGroups [\"\"], resources [\"nodes/status\"], "
          "verbs [\"patch\"] (and [\"nodes\"] get, list and watch)"));
    case 404:
      return absl::NotFoundError(
          StrCat("node \"", node, "\" not found (404: ", msg, "); check --node / NODE_NAME"));
    case 409:
      return absl::AbortedError(StrCat("conflict (409) on node \"", node, "\": ", msg));
    case 422:
      return absl::InvalidArgumentError(StrCat(
          "the API server refused the ", verb, " (422: ", msg, "). Sent: ", sent,
          ". A JSON patch fails like this when its test of metadata.resourceVersion no longer "
          "holds (the Node changed meanwhile: re-read and retry), when a parent object is "
          "missing, or when a value is invalid"));
    case 429:
      return absl::UnavailableError(StrCat("the API server is throttling (429): ", msg));
    case 400:
    case 415:
      return absl::InternalError(StrCat("the API server could not read the request (", r.status,
                                        ": ", msg, "). Sent: ", sent));
    default:
      if (r.status >= 500) {
        return absl::UnavailableError(StrCat("the API server failed (", r.status, ": ", msg, ")"));
      }
      return absl::UnknownError(StrCat("unexpected answer ", r.status, ": ", msg));
  }
}

bool IsLabelRefusal(const absl::Status& s) {
  return s.GetPayload(kLabelsRefusedPayload).has_value();
}

std::string NodeClient::NodePath() const { return StrCat("/api/v1/nodes/", node_); }
std::string NodeClient::StatusPath() const { return StrCat("/api/v1/nodes/", node_, "/status"); }
std::string NodeClient::ListPath() const {
  // resourceVersion=0: answered from the API server's watch cache, not by a
  // read of every Node from etcd; its version is one the cache can watch from.
  return StrCat("/api/v1/nodes?fieldSelector=", EscapePathSegment("metadata.name=" + node_),
                "&resourceVersion=0");
}
std::string NodeClient::WatchPath(const std::string& version, std::chrono::seconds timeout) const {
  std::string path =
      StrCat("/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=", timeout.count(),
             "&fieldSelector=", EscapePathSegment("metadata.name=" + node_));
  if (!version.empty()) StrAppend(&path, "&resourceVersion=", EscapePathSegment(version));
  return path;
}

absl::StatusOr<NodeList> NodeClient::List() {
  const std::string path = ListPath();
  absl::StatusOr<HttpResponse> r = rest_->Get(path);
  if (!r.ok()) return r.status();
  if (absl::Status s = ExplainAnswer(*r, node_, "LIST", "GET " + path); !s.ok()) return s;
  return ParseNodeList(r->body);
}

absl::StatusOr<NodeView> NodeClient::Get() {
  absl::StatusOr<HttpResponse> r = rest_->Get(NodePath());
  if (!r.ok()) return r.status();
  if (absl::Status s = ExplainAnswer(*r, node_, "GET", "GET " + NodePath()); !s.ok()) return s;
  return ParseNode(r->body);
}

absl::StatusOr<NodeView> NodeClient::PatchStatus(const JsonPatch& patch) {
  ++patches_sent_;
  const std::string body = patch.ToJson();
  absl::StatusOr<HttpResponse> r =
      rest_->Patch(StatusPath(), body, kJsonPatchType, patch.guarded());
  if (!r.ok()) return r.status();
  if (absl::Status s = ExplainAnswer(*r, node_, "PATCH", body); !s.ok()) return s;
  return ParseNode(r->body);
}

absl::StatusOr<NodeClient::Applied> NodeClient::Apply(
    const std::function<JsonPatch(const NodeView&)>& plan, std::optional<NodeView> start) {
  constexpr int kAttempts = 4;
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (!start) {
      absl::StatusOr<NodeView> got = Get();
      if (!got.ok()) return got.status();
      start = *std::move(got);
    }
    Applied out;
    out.before = *std::move(start);
    start.reset();
    const JsonPatch patch = plan(out.before);
    if (patch.empty()) {
      out.after = out.before;
      return out;
    }
    absl::StatusOr<NodeView> after = PatchStatus(patch);
    if (after.ok()) {
      out.after = *std::move(after);
      out.patched = true;
      return out;
    }
    last = after.status();
    if (last.code() == absl::StatusCode::kAborted) continue;  // 409: read again
    if (last.code() != absl::StatusCode::kInvalidArgument) return last;
    absl::StatusOr<NodeView> again = Get();
    if (!again.ok()) return again.status();
    if (again->resource_version == out.before.resource_version) return last;  // a real 422
    start = *std::move(again);
  }
  return absl::AbortedError(
      StrCat("node \"", node_, "\" kept changing while it was being patched: ", last.message()));
}

}  // namespace gpu_agent::apiserver
