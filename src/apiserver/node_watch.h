// One Node watched the way client-go's reflector does it, for the capacity
// reconciler and plugin mode's per-node config label alike: LIST the Node by
// name (the list's resourceVersion is the server's current revision), WATCH
// from there, and take every later version from the watch's own events and
// bookmarks, never from the Node's own resourceVersion (a quiet Node keeps
// it until it falls out of the API server's watch window, and every watch
// from it then answers 410 Gone).
//
// A 410 means list again: at once the first time, after a backoff if it
// happens again before a good watch. A watch that fails, answers an error
// or ends at once backs off with jitter; a connection that breaks off is
// opened again after a delay spread over reconnect_spread, so a fleet does
// not reconnect in the same second. Watch timeouts are drawn at random, so
// a fleet started together does not stay in step.
#ifndef GPU_AGENT_APISERVER_NODE_WATCH_H_
#define GPU_AGENT_APISERVER_NODE_WATCH_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"
#include "apiserver/node.h"
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

struct NodeWatchStats {
  std::atomic<uint64_t> lists{0};
  std::atomic<uint64_t> watches{0};
  // Watches answered 410 Gone: the version was older than the server keeps.
  std::atomic<uint64_t> watch_expired{0};
  // Watches that failed, answered an error, or ended at once.
  std::atomic<uint64_t> watch_failures{0};
};

// Called on the watch thread; none may block for long.
struct NodeWatchCallbacks {
  // A state of the Node, from a LIST or an ADDED or MODIFIED event.
  std::function<void(NodeView)> on_node;
  // The Node was deleted.
  std::function<void()> on_deleted;
  // Nothing changed: a bookmark, or a watch that ran its course.
  std::function<void()> on_in_sync;
};

class NodeWatch {
 public:
  // `rest` and `watch_rest` (see NodeWatchClients) and `stats` (null: none
  // kept) must outlive the NodeWatch. Starts the watch thread.
  NodeWatch(NodeWatchOptions options, RestClient* rest, RestClient* watch_rest,
            NodeWatchCallbacks callbacks, NodeWatchStats* stats);
  ~NodeWatch();  // Stop()
  // Ends the watch thread, cancelling requests of both clients (those of
  // other users of `rest` too) until it is out.
  void Stop();

 private:
  void Loop();
  // Waits `d` unless stopped; false when stopped.
  bool Wait(std::chrono::milliseconds d);
  bool Stopped();

  const NodeWatchOptions options_;
  RestClient* const rest_;
  RestClient* const watch_rest_;
  const NodeWatchCallbacks callbacks_;
  NodeWatchStats own_stats_;
  NodeWatchStats* const stats_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // protected by mu_
  bool done_ = false;  // protected by mu_: the loop returned
  std::thread thread_;
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_NODE_WATCH_H_
