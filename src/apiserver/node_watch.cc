#include "apiserver/node_watch.h"

#include <algorithm>

#include "apiserver/node_client.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::apiserver {
absl::StatusOr<NodeWatchClients> CreateNodeWatchClients(const Connection& connection,
                                                        const RestOptions& rest,
                                                        std::chrono::milliseconds watch_timeout) {
  NodeWatchClients out;
  absl::StatusOr<std::unique_ptr<RestClient>> list = RestClient::Create(connection, rest);
  if (!list.ok()) return list.status();
  out.rest = *std::move(list);
  RestOptions watch_opts = rest;
  // A watch of a quiet Node may send nothing until the server ends it.
  watch_opts.read_timeout = 2 * watch_timeout + std::chrono::minutes(1);
  absl::StatusOr<std::unique_ptr<RestClient>> watch = RestClient::Create(connection, watch_opts);
  if (!watch.ok()) return watch.status();
  out.watch = *std::move(watch);
  return out;
}

namespace {

ReflectorOptions ReflectorOptionsFor(const NodeWatchOptions& o) {
  ReflectorOptions r;
  r.watch_timeout = o.watch_timeout;
  r.reconnect_spread = o.reconnect_spread;
  r.backoff_initial = o.backoff_initial;
  r.backoff_max = o.backoff_max;
  r.log_prefix = o.log_prefix;
  r.watch_name = "node watch";
  r.watch_refused = "node watch failed";
  r.log_repeated_expiry = false;
  r.log_fields = {{"node", o.node}};
  return r;
}

}  // namespace

NodeWatch::NodeWatch(NodeWatchOptions options, RestClient* rest, RestClient* watch_rest,
                     NodeWatchCallbacks callbacks, NodeWatchStats* stats)
    : options_(std::move(options)),
      rest_(rest),
      callbacks_(std::move(callbacks)),
      reflector_(ReflectorOptionsFor(options_), this, rest, watch_rest, stats) {
  thread_ = std::thread([this] {
    if (!options_.thread_name.empty()) NameThisThread(options_.thread_name);
    reflector_.Run();
  });
}

NodeWatch::~NodeWatch() { Stop(); }

void NodeWatch::Stop() {
  if (!thread_.joinable()) return;
  reflector_.Cancel();
  thread_.join();
}

std::optional<ReflectorFailure> NodeWatch::List(std::string* version) {
  version->clear();
  if (!may_list_) return std::nullopt;  // watched without a version
  NodeClient lister(rest_, options_.node);
  absl::StatusOr<NodeList> list = lister.List();
  if (!list.ok() && list.status().code() == absl::StatusCode::kPermissionDenied &&
      options_.watch_if_list_forbidden) {
    // An older ClusterRole without `list`: a watch with no version starts
    // with the current Node, at a higher cost to the server.
    may_list_ = false;
    LogWarning(StrCat(options_.log_prefix,
                      "may not list nodes: watching without a version instead (it starts with the "
                      "whole Node); grant nodes list (see manifests/static/agent/rbac.yaml)"),
               {{"node", options_.node}, {"error", std::string(list.status().message())}});
    return std::nullopt;
  }
  if (!list.ok())
    return ReflectorFailure{options_.list_failed, std::string(list.status().message())};
  if (list->items.empty()) {
    return ReflectorFailure{
        options_.list_failed,
        StrCat("node \"", options_.node,
               "\" not found (the API server lists no node of that name); check ",
               options_.node_flag)};
  }
  *version = list->resource_version;
  if (callbacks_.on_node) callbacks_.on_node(std::move(list->items.front()));
  return std::nullopt;
}

std::string NodeWatch::WatchPath(const std::string& version, std::chrono::seconds timeout) {
  return NodeClient(rest_, options_.node).WatchPath(version, timeout);
}

bool NodeWatch::OnEvent(ObjectEvent event) {
  if (event.type == ObjectEvent::Type::kDeleted) {
    if (callbacks_.on_deleted) callbacks_.on_deleted();
    return true;
  }
  absl::StatusOr<NodeView> node = ParseNode(event.object);
  if (!node.ok()) {
    LogWarning(StrCat(options_.log_prefix, "unreadable watch event ignored"),
               {{"node", options_.node}, {"error", std::string(node.status().message())}});
    return true;
  }
  if (callbacks_.on_node) callbacks_.on_node(*std::move(node));
  return true;
}

void NodeWatch::InSync() {
  if (callbacks_.on_in_sync) callbacks_.on_in_sync();
}

}  // namespace gpu_agent::apiserver
