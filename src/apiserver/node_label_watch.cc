#include "apiserver/node_label_watch.h"

namespace gpu_agent::apiserver {

absl::StatusOr<std::unique_ptr<NodeLabelWatch>> NodeLabelWatch::Start(Connection connection,
                                                                      NodeLabelWatchOptions options,
                                                                      OnValue on_value) {
  std::unique_ptr<NodeLabelWatch> w(new NodeLabelWatch());
  absl::StatusOr<NodeWatchClients> clients =
      CreateNodeWatchClients(connection, options.rest, options.watch_timeout);
  if (!clients.ok()) return clients.status();
  w->clients_ = *std::move(clients);
  NodeWatchOptions o = static_cast<const NodeWatchOptions&>(options);
  o.log_prefix = "node config: ";
  o.list_failed = "cannot list the node; will retry";
  o.node_flag = "--node-name / NODE_NAME";
  NodeWatchCallbacks callbacks;
  callbacks.on_node = [label = options.label, on_value = std::move(on_value)](NodeView node) {
    auto it = node.labels.find(label);
    on_value(it == node.labels.end() ? std::nullopt : std::optional<std::string>(it->second));
  };
  w->watch_ = std::make_unique<NodeWatch>(std::move(o), w->clients_.rest.get(),
                                          w->clients_.watch.get(), std::move(callbacks), nullptr);
  return w;
}

NodeLabelWatch::~NodeLabelWatch() { Stop(); }

void NodeLabelWatch::Stop() {
  if (watch_) watch_->Stop();
}

}  // namespace gpu_agent::apiserver
