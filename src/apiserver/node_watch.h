// One Node watched through apiserver/reflector.h, for the capacity
// reconciler and plugin mode's per-node config label alike: LIST the Node
// by name, WATCH from the list's version, list again on 410 Gone, back off
// with jitter after failures, spread reconnects and watch timeouts.
#ifndef GPU_AGENT_APISERVER_NODE_WATCH_H_
#define GPU_AGENT_APISERVER_NODE_WATCH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"
#include "apiserver/node.h"
#include "apiserver/reflector.h"
#include "apiserver/rest_client.h"

namespace gpu_agent::apiserver {

struct NodeWatchOptions {
  std::string node;
  // Each watch asks the server to end it after a time drawn from
  // [watch_timeout, 2*watch_timeout), whole seconds, at least 1 s.
  std::chrono::milliseconds watch_timeout{std::chrono::minutes(10)};
  // The first retry after a broken connection waits a time drawn from
  // [0, reconnect_spread).
  std::chrono::milliseconds reconnect_spread{std::chrono::seconds(10)};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
  // Starts every warning, so the log tells which watch it is from.
  std::string log_prefix;
  // The warning when the LIST fails (after log_prefix).
  std::string list_failed = "cannot read the node; will retry";
  // Where the node's name comes from, for the warning when it is not found.
  std::string node_flag = "--node / NODE_NAME";
  // On a 403 to the LIST (an older ClusterRole without `list`), watch with
  // no version instead (it starts with the whole Node) rather than retry.
  bool watch_if_list_forbidden = false;
  // Names the watch thread when not empty.
  std::string thread_name;
};

// The two clients a Node watch needs: one for LIST (its owner's GETs and
// PATCHes may share it), one for the watch stream, whose read timeout
// outlasts the longest watch: a watch of a quiet Node may send nothing
// until the server ends it.
struct NodeWatchClients {
  std::unique_ptr<RestClient> rest;
  std::unique_ptr<RestClient> watch;
};
absl::StatusOr<NodeWatchClients> CreateNodeWatchClients(const Connection& connection,
                                                        const RestOptions& rest,
                                                        std::chrono::milliseconds watch_timeout);

using NodeWatchStats = ReflectorStats;

// Called on the watch thread; none may block for long.
struct NodeWatchCallbacks {
  // A state of the Node, from a LIST or an ADDED or MODIFIED event.
  std::function<void(NodeView)> on_node;
  // The Node was deleted.
  std::function<void()> on_deleted;
  // Nothing changed: a bookmark, or a watch that ran its course.
  std::function<void()> on_in_sync;
};

class NodeWatch : private ReflectorHandler {
 public:
  // `rest` and `watch_rest` (see NodeWatchClients) and `stats` (null: none
  // kept) must outlive the NodeWatch. Starts the watch thread.
  NodeWatch(NodeWatchOptions options, RestClient* rest, RestClient* watch_rest,
            NodeWatchCallbacks callbacks, NodeWatchStats* stats);
  ~NodeWatch() override;  // Stop()
  // Ends the watch thread, cancelling requests of both clients (those of
  // other users of `rest` too: RestClient::Cancel stays until Resume).
  void Stop();

 private:
  std::optional<ReflectorFailure> List(std::string* version) override;
  std::string WatchPath(const std::string& version, std::chrono::seconds timeout) override;
  bool OnEvent(ObjectEvent event) override;
  void InSync() override;

  const NodeWatchOptions options_;
  RestClient* const rest_;
  const NodeWatchCallbacks callbacks_;
  bool may_list_ = true;  // used by the watch thread only
  Reflector reflector_;
  std::thread thread_;
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_NODE_WATCH_H_
