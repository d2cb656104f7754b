// Keeps extended resources of one Node at desired values: patches them on
// start, watches the Node and repairs drift as soon as an event shows it
// (the kubelet zeroes extended resources when the node re-registers),
// re-reads it on a rare randomized timer, and sends no request while
// nothing changes but the watch's renewals and that re-read.
//
// Watching is apiserver/node_watch.h's: LIST the Node, WATCH from the
// list's version, list again on 410 Gone, back off with jitter after
// failures. Re-reads are drawn at random, so a fleet started together does
// not stay in step.
//
// A value reset again and again is a fight with another writer: reported
// once and then only re-checked on the re-read timer. Errors back off with
// jitter.
#ifndef GPU_AGENT_AGENT_RUN_CAPACITY_RECONCILER_H_
#define GPU_AGENT_AGENT_RUN_CAPACITY_RECONCILER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "apiserver/connection.h"
#include "apiserver/label_patch.h"
#include "apiserver/node.h"
#include "apiserver/node_watch.h"
#include "apiserver/rest_client.h"
#include "base/clock.h"

namespace gpu_agent {

struct ReconcilerOptions {
  std::string node;
  bool allocatable = true;
  // A full re-read of the Node (one GET) every interval drawn from
  // [resync/2, 3*resync/2). The watch already reports every change; this
  // is insurance, so it is rare.
  std::chrono::milliseconds resync{std::chrono::minutes(30)};
  // Each watch asks the server to end it after a time drawn from
  // [watch_timeout, 2*watch_timeout), whole seconds, at least 1 s.
  std::chrono::milliseconds watch_timeout{std::chrono::minutes(10)};
  // A watch that breaks off (the connection lost: typically an API server
  // restart, or a load balancer dropping it) is opened again after a delay
  // drawn from [0, reconnect_spread), so a whole fleet does not reconnect
  // in the same second. Nothing is missed meanwhile: the new watch starts
  // from the last version seen.
  std::chrono::milliseconds reconnect_spread{std::chrono::seconds(10)};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
  // This many resets within fight_window make a fight.
  int fight_resets = 3;
  std::chrono::milliseconds fight_window{std::chrono::minutes(2)};
  // Node labels the agent keeps (apiserver/label_patch.h), in the same PATCH
  // as capacity; empty: only the agent's own earlier labels are removed;
  // nullopt: labels are not looked at.
  std::optional<apiserver::Labels> labels;
  // Called on the watch thread with every state of the Node a LIST or a
  // watch event shows (the per-node config reads its label here, so one
  // watch serves both). Must not block.
  std::function<void(const apiserver::NodeView&)> on_node;
  apiserver::RestOptions rest;
  // What the fight window and the resync timer are read on; must outlive
  // the reconciler. Waits stay real (a fake clock's test advances it and
  // then makes the reconciler look, with a change of the Node).
  const Clock* clock = Clock::Real();
};

// The watch's counters (lists, watches, watch_expired, watch_failures) and
// the reconciler's own.
struct ReconcilerStats : apiserver::NodeWatchStats {
  std::atomic<uint64_t> patches{0};
  std::atomic<uint64_t> drift_repairs{0};
  // Views that differed from the desired value but were no newer than the
  // agent's last write (a lagging watch, or a history restored from a
  // backup): each made the agent read the Node again.
  std::atomic<uint64_t> stale_views{0};
  std::atomic<uint64_t> fights{0};
  // 403s refusing label keys; after one, only capacity is kept.
  std::atomic<uint64_t> label_refusals{0};
  // Wanted label keys another writer holds with another value (left alone).
  std::atomic<uint64_t> foreign_labels{0};
  std::atomic<uint64_t> errors{0};
  // When the agent last knew the Node had the desired value (Unix time): a
  // reconcile, a LIST or a watch event showing it, or a watch that ended
  // normally with nothing changed.
  std::atomic<int64_t> last_success_unix{0};
};

class CapacityReconciler {
 public:
  static absl::StatusOr<std::unique_ptr<CapacityReconciler>> Start(apiserver::Connection connection,
                                                                   ReconcilerOptions options,
                                                                   apiserver::Capacities desired);
  ~CapacityReconciler();  // Stop(false)

  // New desired values (GPU health changed): reconciled at once. A resource
  // that was desired before and is missing now is set to 0, never left at
  // an old count.
  void SetDesired(apiserver::Capacities value);
  apiserver::Capacities desired() const;
  // Stops the threads; with `remove`, removes the resources from the Node.
  absl::Status Stop(bool remove);

  const ReconcilerStats& stats() const { return stats_; }
  // API answers >= 400 by HTTP code (0: no answer), reads and patches.
  std::map<int, uint64_t> ApiErrors() const { return rest_->ErrorCounts(); }
  // Requests sent again at once after the server cut them off unanswered.
  uint64_t Resent() const { return rest_->resent(); }
  // The longest the agent may go without news of the Node while all is
  // well: the longest re-read interval or watch, whichever is longer.
  std::chrono::milliseconds QuietBound() const;

 private:
  CapacityReconciler(apiserver::Connection c, ReconcilerOptions o, apiserver::Capacities desired);
  void Loop();
  // What the Node watch reports, handed to Observe and MarkInSync.
  apiserver::NodeWatchCallbacks WatchCallbacks();
  // One reconcile from `node` (or a fresh GET); returns when done or failed.
  absl::Status ReconcileOnce(std::optional<apiserver::NodeView> node);
  // A state of the Node seen in a LIST or a watch event: repaired by the
  // reconcile loop if it differs from the desired values.
  void Observe(apiserver::NodeView node);
  void NoteReset();
  void MarkInSync();
  // The labels to keep now: none once the server refused them.
  const apiserver::Labels* ActiveLabels() const;
  // Logs, once per key, keys another writer holds.
  void ReportForeign(const std::vector<std::string>& keys);

  const apiserver::Connection connection_;
  const ReconcilerOptions options_;
  std::unique_ptr<apiserver::RestClient> rest_;        // GET, LIST and PATCH
  std::unique_ptr<apiserver::RestClient> watch_rest_;  // the watch stream
  ReconcilerStats stats_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                // protected by mu_
  apiserver::Capacities desired_;                    // protected by mu_
  bool dirty_ = false;                               // protected by mu_: reconcile with a GET asap
  std::optional<apiserver::NodeView> pending_view_;  // protected by mu_: from a LIST or watch event
  bool observed_ = false;                            // protected by mu_: a LIST or event was seen
  bool fighting_ = false;                            // protected by mu_
  std::vector<Clock::TimePoint> resets_;             // protected by mu_
  bool last_seen_ok_ = false;  // protected by mu_: the last state seen had the value
  uint64_t written_ = 0;       // protected by mu_: version of the agent's last PATCH
  std::atomic<bool> labels_refused_{false};
  std::set<std::string> foreign_reported_;  // used by the loop thread only

  std::thread loop_;
  std::unique_ptr<apiserver::NodeWatch> watch_;  // after the clients: stopped before they go
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_CAPACITY_RECONCILER_H_
