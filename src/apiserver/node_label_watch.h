// A light watch of one Node's label, for plugin mode's per-node config
// (static mode reads the label from its reconciler's own watch). Watches as
// the reconciler does (see node_watch.h): LIST the Node by name, WATCH from
// the list's version, list again on 410 Gone, back off with jitter after
// failures, spread reconnects and watch timeouts at random.
#ifndef GPU_AGENT_APISERVER_NODE_LABEL_WATCH_H_
#define GPU_AGENT_APISERVER_NODE_LABEL_WATCH_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"
#include "apiserver/node_watch.h"
#include "apiserver/rest_client.h"

namespace gpu_agent::apiserver {

// The watch's own settings (node, watch_timeout, reconnect_spread, backoff)
// and the label's; log_prefix, list_failed and node_flag are set by Start.
struct NodeLabelWatchOptions : NodeWatchOptions {
  std::string label;
  RestOptions rest;
};

class NodeLabelWatch {
 public:
  // `on_value` is called on the watch thread with the label's value in
  // every state of the Node seen (nullopt: the Node has no such label); the
  // caller tells changes apart.
  using OnValue = std::function<void(const std::optional<std::string>&)>;
  static absl::StatusOr<std::unique_ptr<NodeLabelWatch>> Start(Connection connection,
                                                               NodeLabelWatchOptions options,
                                                               OnValue on_value);
  ~NodeLabelWatch();  // Stop()
  void Stop();

 private:
  NodeLabelWatch() = default;

  NodeWatchClients clients_;
  std::unique_ptr<NodeWatch> watch_;  // after the clients: stopped before they go
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_NODE_LABEL_WATCH_H_
