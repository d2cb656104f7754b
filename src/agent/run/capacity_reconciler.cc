#include "agent/run/capacity_reconciler.h"

#include <algorithm>
#include <set>

#include "apiserver/node_client.h"
#include "base/backoff.h"
#include "base/duration.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent {
namespace {

// A resourceVersion as a number, 0 when it is not one. Versions are opaque
// to clients; this is used only to skip states older than the agent's own
// write, and any server that numbers them otherwise just skips nothing.
uint64_t VersionNumber(const std::string& v) {
  if (v.empty() || v.size() > 19) return 0;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Describe(const apiserver::Capacities& c) {
  std::string out;
  for (const auto& [r, v] : c) StrAppend(&out, out.empty() ? "" : ", ", r, "=", v);
  return out;
}

std::string DescribeSeen(const apiserver::NodeView& node, const apiserver::Capacities& want) {
  std::string out;
  for (const auto& [r, v] : want) {
    StrAppend(&out, out.empty() ? "" : ", ", r, "=", node.Capacity(r).value_or("unset"));
  }
  return out;
}

}  // namespace

CapacityReconciler::CapacityReconciler(apiserver::Connection c, ReconcilerOptions o,
                                       apiserver::Capacities desired)
    : connection_(std::move(c)), options_(std::move(o)), desired_(std::move(desired)) {}

absl::StatusOr<std::unique_ptr<CapacityReconciler>> CapacityReconciler::Start(
    apiserver::Connection connection, ReconcilerOptions options, apiserver::Capacities desired) {
  std::unique_ptr<CapacityReconciler> r(
      new CapacityReconciler(connection, std::move(options), std::move(desired)));
  absl::StatusOr<apiserver::NodeWatchClients> clients =
      apiserver::CreateNodeWatchClients(connection, r->options_.rest, r->options_.watch_timeout);
  if (!clients.ok()) return clients.status();
  r->rest_ = std::move(clients->rest);
  r->watch_rest_ = std::move(clients->watch);
  CapacityReconciler* raw = r.get();
  r->loop_ = std::thread([raw] {
    NameThisThread("reconcile");
    raw->Loop();
  });
  apiserver::NodeWatchOptions w;
  w.node = r->options_.node;
  w.watch_timeout = r->options_.watch_timeout;
  w.reconnect_spread = r->options_.reconnect_spread;
  w.backoff_initial = r->options_.backoff_initial;
  w.backoff_max = r->options_.backoff_max;
  w.watch_if_list_forbidden = true;
  w.thread_name = "node-watch";
  r->watch_ = std::make_unique<apiserver::NodeWatch>(
      std::move(w), r->rest_.get(), r->watch_rest_.get(), r->WatchCallbacks(), &r->stats_);
  return r;
}

CapacityReconciler::~CapacityReconciler() { (void)Stop(false); }

apiserver::Capacities CapacityReconciler::desired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return desired_;
}

void CapacityReconciler::SetDesired(apiserver::Capacities value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [r, v] : desired_) value.emplace(r, 0);
    if (desired_ == value) return;
    desired_ = value;
    dirty_ = true;
    fighting_ = false;  // a real change deserves a fresh try
    resets_.clear();
    last_seen_ok_ = false;  // what was seen had the old value
  }
  cv_.notify_all();
}

void CapacityReconciler::NoteReset() {
  // REQUIRES: mu_ held.
  const auto now = options_.clock->Now();
  resets_.push_back(now);
  while (!resets_.empty() && now - resets_.front() > options_.fight_window) {
    resets_.erase(resets_.begin());
  }
  if (!fighting_ && static_cast<int>(resets_.size()) >= options_.fight_resets) {
    fighting_ = true;
    ++stats_.fights;
    LogError(
        "another writer keeps resetting this resource: not fighting it; re-checking only on the "
        "resync timer",
        {{"node", options_.node},
         {"resources", Describe(desired_)},
         {"resets", StrCat(resets_.size())},
         {"within", StrCat(options_.fight_window.count() / 1000, "s")},
         {"likely_cause",
          "a device plugin (NVIDIA's, or gpu-agent in plugin mode) advertises the same resource "
          "on this node; the kubelet then owns it and zeroes it. Run one of them, not both"}});
  }
}

absl::Status CapacityReconciler::ReconcileOnce(std::optional<apiserver::NodeView> node) {
  apiserver::NodeClient client(rest_.get(), options_.node);
  apiserver::Capacities desired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    desired = desired_;
  }
  const apiserver::Labels* labels = ActiveLabels();
  std::vector<std::string> foreign;
  absl::StatusOr<apiserver::NodeClient::Applied> applied = client.Apply(
      [&](const apiserver::NodeView& n) {
        return apiserver::PlanNode(n, desired, options_.allocatable, labels, &foreign);
      },
      std::move(node));
  stats_.patches += client.patches_sent();
  if (!applied.ok()) {
    if (labels != nullptr && apiserver::IsLabelRefusal(applied.status())) {
      labels_refused_ = true;
      ++stats_.label_refusals;
      LogError("node labels refused: keeping capacity only until the agent restarts or reloads",
               {{"node", options_.node}, {"error", std::string(applied.status().message())}});
    }
    return applied.status();
  }
  ReportForeign(foreign);
  if (applied->patched) {
    LogInfo("node capacity set", {{"node", options_.node},
                                  {"set", Describe(desired)},
                                  {"was", DescribeSeen(applied->before, desired)},
                                  {"labels", labels ? StrCat(labels->size()) : "not kept"}});
  }
  stats_.last_success_unix = UnixNow();
  // The watch keeps its own version: the Node's, even a fresh one, is never
  // one to watch from.
  std::lock_guard<std::mutex> lock(mu_);
  last_seen_ok_ = true;
  if (applied->patched) written_ = VersionNumber(applied->after.resource_version);
  return absl::OkStatus();
}

const apiserver::Labels* CapacityReconciler::ActiveLabels() const {
  return options_.labels && !labels_refused_ ? &*options_.labels : nullptr;
}

void CapacityReconciler::ReportForeign(const std::vector<std::string>& keys) {
  stats_.foreign_labels = keys.size();
  for (const std::string& k : keys) {
    if (!foreign_reported_.insert(k).second) continue;
    LogWarning(
        "node label held by another writer (gpu-feature-discovery, an operator, a person): "
        "leaving it",
        {{"node", options_.node}, {"label", k}, {"want", options_.labels->at(k)}});
  }
}

void CapacityReconciler::MarkInSync() { stats_.last_success_unix = UnixNow(); }

apiserver::NodeWatchCallbacks CapacityReconciler::WatchCallbacks() {
  apiserver::NodeWatchCallbacks c;
  c.on_node = [this](apiserver::NodeView node) { Observe(std::move(node)); };
  c.on_deleted = [this] {
    LogWarning("the node was deleted; waiting for it to come back", {{"node", options_.node}});
    std::lock_guard<std::mutex> lock(mu_);
    last_seen_ok_ = false;
  };
  c.on_in_sync = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_seen_ok_) MarkInSync();
  };
  return c;
}

std::chrono::milliseconds CapacityReconciler::QuietBound() const {
  return std::max(options_.resync * 3 / 2, options_.watch_timeout * 2);
}

void CapacityReconciler::Observe(apiserver::NodeView node) {
  if (options_.on_node) options_.on_node(node);
  std::lock_guard<std::mutex> lock(mu_);
  bool drift = false;
  for (const auto& [r, v] : desired_) {
    const std::string want = StrCat(v);
    drift |= node.Capacity(r) != want || (options_.allocatable && node.Allocatable(r) != want);
  }
  if (const apiserver::Labels* labels = ActiveLabels(); labels != nullptr) {
    drift |= apiserver::LabelsDiffer(node, *labels);
  }
  // A state no newer than the agent's own last write is either from before
  // it (a watch lagging behind: the write superseded it) or from a history
  // that started again below it (etcd restored from a backup keeps each
  // object's old version). Neither is acted on as it stands: when it differs
  // from what the agent wants, the Node is read again, and that read decides.
  const uint64_t seen = VersionNumber(node.resource_version);
  if (seen != 0 && seen <= written_) {
    if (drift) {
      ++stats_.stale_views;
      dirty_ = true;
      cv_.notify_all();
    }
    return;
  }
  const bool first = !observed_;
  observed_ = true;
  // A reset is a change from the desired value to another one.
  const bool was_ok = last_seen_ok_;
  last_seen_ok_ = !drift;
  if (!drift) {
    MarkInSync();
    return;
  }
  if (!first) {
    if (was_ok) NoteReset();
    if (fighting_) return;
    ++stats_.drift_repairs;
    LogInfo("node capacity or labels drifted; repairing", {{"node", options_.node},
                                                           {"seen", DescribeSeen(node, desired_)},
                                                           {"want", Describe(desired_)}});
  }
  pending_view_ = std::move(node);
  cv_.notify_all();
}

void CapacityReconciler::Loop() {
  // Reconciles in a row that failed: backoff_initial, doubling up to
  // backoff_max; a success starts it over.
  gpu_agent::Backoff failures =
      gpu_agent::Backoff::Doubling(options_.backoff_initial, options_.backoff_max);
  // The first reconcile starts from the watch's LIST; this timer only
  // re-reads the Node, rarely.
  auto next_resync = options_.clock->Now() + Spread(options_.resync, 0.5, 1.5);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, options_.clock->Until(next_resync),
                 [this] { return stop_ || dirty_ || pending_view_; });
    if (stop_) break;
    std::optional<apiserver::NodeView> view = std::move(pending_view_);
    pending_view_.reset();
    const bool timer = !dirty_ && !view;
    dirty_ = false;
    lock.unlock();
    absl::Status s = ReconcileOnce(timer ? std::nullopt : std::move(view));
    lock.lock();
    if (s.ok()) {
      failures.Reset();
      next_resync = options_.clock->Now() + Spread(options_.resync, 0.5, 1.5);
      continue;
    }
    ++stats_.errors;
    const auto wait = failures.Next();
    LogWarning("could not reconcile node capacity; will retry",
               {{"node", options_.node},
                {"error", std::string(s.message())},
                {"retry_in", StrCat(wait.count(), "ms")}});
    next_resync = options_.clock->Now() + wait;
    dirty_ = false;
  }
}

absl::Status CapacityReconciler::Stop(bool remove) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !loop_.joinable()) return absl::OkStatus();
    stop_ = true;
  }
  cv_.notify_all();
  // The watch's Stop cancels requests of rest_: the loop's request too.
  // (No watch ran if Start() failed.)
  if (watch_) watch_->Stop();
  if (loop_.joinable()) loop_.join();
  if (!remove) return absl::OkStatus();
  if (rest_) rest_->Resume();
  apiserver::NodeClient client(rest_.get(), options_.node);
  std::set<std::string> resources;
  for (const auto& [r, v] : desired()) resources.insert(r);
  const bool labels = ActiveLabels() != nullptr;
  absl::StatusOr<apiserver::NodeClient::Applied> applied =
      client.Apply([&](const apiserver::NodeView& n) {
        return apiserver::PlanRemoveAll(n, resources, options_.allocatable, labels);
      });
  if (!applied.ok()) return applied.status();
  if (applied->patched) {
    LogInfo("removed the resource (and the agent's labels) from the node on exit",
            {{"node", options_.node}, {"resources", StrJoin(resources, ", ")}});
  }
  return absl::OkStatus();
}

}  // namespace gpu_agent
