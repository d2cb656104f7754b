// A light watch of one Node's label, for plugin mode's per-node config
// (static mode reads the label from its reconciler's own watch). Watches as
// the reconciler does (see capacity_reconciler.h): LIST the Node by name,
// WATCH from the list's version, list again on 410 Gone, back off with
// jitter after failures, spread reconnects and watch timeouts at random.
#ifndef GPU_AGENT_APISERVER_NODE_LABEL_WATCH_H_
#define GPU_AGENT_APISERVER_NODE_LABEL_WATCH_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"
#include "apiserver/rest_client.h"

namespace gpu_agent::apiserver {

struct NodeLabelWatchOptions {
  std::string node;
  std::string label;
  std::chrono::milliseconds watch_timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds reconnect_spread{std::chrono::seconds(10)};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
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
  NodeLabelWatch(NodeLabelWatchOptions o, OnValue v) : options_(std::move(o)), on_value_(v) {}
  void Loop();
  // Waits `d` unless stopped; false when stopped.
  bool Wait(std::chrono::milliseconds d);
  std::chrono::milliseconds Backoff(int failures) const;

  const NodeLabelWatchOptions options_;
  const OnValue on_value_;
  std::unique_ptr<RestClient> rest_;        // LIST
  std::unique_ptr<RestClient> watch_rest_;  // the watch stream
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // protected by mu_
  bool done_ = false;  // protected by mu_: the loop returned
  std::thread thread_;
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_NODE_LABEL_WATCH_H_
