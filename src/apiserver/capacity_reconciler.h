// Keeps extended resources of one Node at desired values: patches them on
// start, watches the Node and repairs drift as soon as an event shows it
// (the kubelet zeroes extended resources when the node re-registers),
// re-checks on a long timer, and sends no request while nothing changes.
// A value reset again and again is a fight with another writer: reported
// once and then only re-checked on the timer. Errors back off with jitter.
#ifndef GPU_AGENT_APISERVER_CAPACITY_RECONCILER_H_
#define GPU_AGENT_APISERVER_CAPACITY_RECONCILER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "apiserver/connection.h"
#include "apiserver/node.h"
#include "apiserver/rest_client.h"

namespace gpu_agent::apiserver {

struct ReconcilerOptions {
  std::string node;
  bool allocatable = true;
  std::chrono::milliseconds resync{std::chrono::minutes(5)};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
  // This many resets within fight_window make a fight.
  int fight_resets = 3;
  std::chrono::milliseconds fight_window{std::chrono::minutes(2)};
  RestOptions rest;
};

struct ReconcilerStats {
  std::atomic<uint64_t> patches{0};
  std::atomic<uint64_t> drift_repairs{0};
  std::atomic<uint64_t> fights{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<int64_t> last_success_unix{0};
};

class CapacityReconciler {
 public:
  static absl::StatusOr<std::unique_ptr<CapacityReconciler>> Start(Connection connection,
                                                                   ReconcilerOptions options,
                                                                   Capacities desired);
  ~CapacityReconciler();  // Stop(false)

  // New desired values (GPU health changed): reconciled at once. A resource
  // that was desired before and is missing now is set to 0, never left at
  // an old count.
  void SetDesired(Capacities value);
  Capacities desired() const;
  // Stops the threads; with `remove`, removes the resources from the Node.
  absl::Status Stop(bool remove);

  const ReconcilerStats& stats() const { return stats_; }
  // API answers >= 400 by HTTP code (0: no answer), reads and patches.
  std::map<int, uint64_t> ApiErrors() const { return rest_->ErrorCounts(); }

 private:
  CapacityReconciler(Connection c, ReconcilerOptions o, Capacities desired);
  void Loop();
  void WatchLoop();
  // One reconcile from `node` (or a fresh GET); returns when done or failed.
  absl::Status ReconcileOnce(std::optional<NodeView> node);
  void NoteReset();

  const Connection connection_;
  const ReconcilerOptions options_;
  std::unique_ptr<RestClient> rest_;
  std::unique_ptr<RestClient> watch_rest_;
  ReconcilerStats stats_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                     // protected by mu_
  Capacities desired_;                    // protected by mu_
  bool dirty_ = true;                     // protected by mu_: reconcile asap
  std::optional<NodeView> pending_view_;  // protected by mu_: from a watch event
  std::string resource_version_;          // protected by mu_
  bool fighting_ = false;                 // protected by mu_
  std::vector<std::chrono::steady_clock::time_point> resets_;  // protected by mu_
  bool ever_set_ = false;                                      // protected by mu_
  bool last_seen_ok_ = false;  // protected by mu_: last watch event had the value
  bool watch_done_ = false;    // protected by mu_

  std::thread loop_;
  std::thread watch_;
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_CAPACITY_RECONCILER_H_
