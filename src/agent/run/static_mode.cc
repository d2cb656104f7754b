#include "agent/run/static_mode.h"

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "agent/config/api_connection.h"
#include "agent/labels/gpu_labels.h"
#include "agent/labels/nfd_feature_file.h"
#include "agent/plan/resource_plan.h"
#include "agent/run/capacity_reconciler.h"
#include "agent/run/desired_capacities.h"
#include "agent/run/mode_runner.h"
#include "agent/run/reload.h"
#include "apiserver/connection.h"
#include "base/log.h"
#include "base/prom_text.h"
#include "base/strings.h"
#include "health/health_watcher.h"

namespace gpu_agent {
namespace {

// Where health reports go once the reconciler runs (the watcher starts
// before it). The watcher is stopped before the reconciler goes.
class ReconcilerSink {
 public:
  void SetDesired(const apiserver::Capacities& c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (r_ != nullptr) r_->SetDesired(c);
  }
  // `started_with`: what the reconciler was started with. A report that
  // came since (and found no reconciler) is sent now; the count is taken
  // under the lock, so a report racing this one is sent by its own call.
  void Attach(CapacityReconciler* r, const apiserver::Capacities& started_with,
              const DesiredCapacities& desired) {
    std::lock_guard<std::mutex> lock(mu_);
    r_ = r;
    const apiserver::Capacities now = desired.Value();
    if (now != started_with) r_->SetDesired(now);
  }

 private:
  std::mutex mu_;
  CapacityReconciler* r_ = nullptr;  // protected by mu_
};

struct Running {
  std::shared_ptr<DesiredCapacities> desired;
  std::unique_ptr<CapacityReconciler> reconciler;
};

void RenderStaticMetrics(const Running& r, PromText* out) {
  PromText& p = *out;
  if (!r.reconciler) return;
  const ReconcilerStats& s = r.reconciler->stats();
  p.Family("gpu_agent_static_desired", "gauge", "Value static mode keeps in the Node's capacity.");
  for (const auto& [resource, value] : r.reconciler->desired()) {
    p.Sample("gpu_agent_static_desired", {{"resource", resource}}, static_cast<double>(value));
  }
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    p.Family(name, "counter", help);
    p.Sample(name, {}, static_cast<double>(v));
  };
  counter("gpu_agent_static_patches_total", "PATCH requests sent.", s.patches.load());
  counter("gpu_agent_static_drift_repairs_total", "Drift seen in a watch event and repaired.",
          s.drift_repairs.load());
  counter("gpu_agent_static_stale_views_total",
          "Node views no newer than the agent's last write that differed from it; each made the "
          "agent read the Node again.",
          s.stale_views.load());
  counter("gpu_agent_static_fights_total", "Fights with another writer detected.", s.fights.load());
  counter("gpu_agent_static_label_refusals_total",
          "PATCHes refused (403) for their label keys; after one, only capacity is kept.",
          s.label_refusals.load());
  p.Family("gpu_agent_static_foreign_labels", "gauge",
           "Wanted node labels another writer holds with another value (left alone).");
  p.Sample("gpu_agent_static_foreign_labels", {}, static_cast<double>(s.foreign_labels.load()));
  counter("gpu_agent_static_reconcile_errors_total", "Reconciles that failed and were retried.",
          s.errors.load());
  counter("gpu_agent_static_lists_total", "LISTs of the Node, each followed by a watch.",
          s.lists.load());
  counter("gpu_agent_static_watches_total", "Watches of the Node opened.", s.watches.load());
  counter("gpu_agent_static_watch_expired_total",
          "Watches answered 410 Gone (version no longer held by the API server); each lists again.",
          s.watch_expired.load());
  counter("gpu_agent_static_watch_failures_total",
          "Watches that failed, ended with an error event, or ended at once; each backs off.",
          s.watch_failures.load());
  counter("gpu_agent_api_requests_resent_total",
          "Requests the API server cut off unanswered (a closed kept-alive connection), sent again "
          "at once on a new connection.",
          r.reconciler->Resent());
  p.Family("gpu_agent_static_last_success_timestamp_seconds", "gauge",
           "When the Node last had the desired value (Unix time).");
  p.Sample("gpu_agent_static_last_success_timestamp_seconds", {},
           static_cast<double>(s.last_success_unix.load()));
  p.Family("gpu_agent_api_errors_total", "counter",
           "API server answers of 400 or more by HTTP code; 0: no answer.");
  for (const auto& [code, n] : r.reconciler->ApiErrors()) {
    p.Sample("gpu_agent_api_errors_total", {{"code", StrCat(code)}}, static_cast<double>(n));
  }
}

bool StaticReady(const Running& r, std::string* why) {
  if (!r.reconciler) {
    *why = "not running";
    return false;
  }
  const int64_t last = r.reconciler->stats().last_success_unix.load();
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // News of the Node (a re-read, a watch event or bookmark, a watch ending
  // normally) comes at least this often; allow a tenth more before saying no.
  const int64_t allowed =
      std::chrono::duration_cast<std::chrono::seconds>(r.reconciler->QuietBound()).count() * 11 /
      10;
  if (last == 0) {
    *why = "the Node has not been reconciled yet";
    return false;
  }
  if (now - last > allowed) {
    *why = StrCat("last successful reconcile was ", now - last, " s ago");
    return false;
  }
  return true;
}

// Starts the health watcher, its reports going to the function given.
using StartWatcher = std::function<std::unique_ptr<health::HealthWatcher>(
    std::function<void(const health::HealthChange&)>)>;

// `retired`: resources an earlier config kept that this one does not; they
// are set to 0 rather than left at their old counts. `watch` starts the
// generation's health watcher (carrying what the earlier one had out, which
// stays out).
absl::Status StartAll(const ModeContext& ctx, const Generation& gen,
                      const apiserver::Capacities& retired, const StartWatcher& watch,
                      health::HealthSlot* health, Running* out) {
  const Config& config = gen.config();
  NodeConfigSelector* node_config = ctx.node_config;
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  if (!conn.ok()) return conn.status();
  ApplyNfdOutput(config, gen.labels.labels);
  out->desired = std::make_shared<DesiredCapacities>(gen.model, gen.plan);
  std::shared_ptr<DesiredCapacities> d = out->desired;
  // The watcher first: what it reports at start (Start returns after) is
  // counted out from the first PATCH on. Later reports reach the reconciler
  // once it runs.
  auto sink = std::make_shared<ReconcilerSink>();
  health->Replace(
      watch([sink, d](const health::HealthChange& c) { sink->SetDesired(d->Apply(c)); }));
  const apiserver::Capacities counted = d->Value();
  apiserver::Capacities desired = counted;
  if (desired.empty()) desired[config.resource_name] = 0;  // no GPU: say so on the Node
  for (const auto& [r, v] : retired) desired.emplace(r, 0);
  ReconcilerOptions opts;
  opts.node = config.node_name;
  opts.allocatable = config.static_mode.allocatable;
  opts.resync = config.static_mode.resync_interval;
  opts.watch_timeout = config.static_mode.watch_timeout;
  // Labels on the Node when they go there; else an empty set, so the
  // agent's own earlier labels (if any) are removed and nothing else.
  opts.labels = config.node_labels.Effective(config.agent_mode()) == LabelOutput::kNode
                    ? gen.labels.labels
                    : apiserver::Labels{};
  opts.rest = RestOptionsFor(config);
  if (node_config) {
    // The per-node config's label, from this same watch.
    opts.on_node = [node_config, events = ctx.events,
                    key = node_config->settings().label](const apiserver::NodeView& n) {
      auto it = n.labels.find(key);
      ObserveConfigLabel(
          node_config, events,
          it == n.labels.end() ? std::nullopt : std::optional<std::string>(it->second));
    };
  }
  std::string summary;
  for (const auto& [r, v] : desired) StrAppend(&summary, summary.empty() ? "" : ", ", r, "=", v);
  LogInfo("static mode: keeping node capacity",
          {{"node", opts.node}, {"capacity", summary}, {"api", conn->description}});
  absl::StatusOr<std::unique_ptr<CapacityReconciler>> rec =
      CapacityReconciler::Start(*conn, opts, desired);
  if (!rec.ok()) {
    health->Stop();
    return rec.status();
  }
  out->reconciler = *std::move(rec);
  // A report between the count above and now: send what it changed.
  sink->Attach(out->reconciler.get(), counted, *d);
  return absl::OkStatus();
}

// Stops the reconciler (the health watcher is stopped first, by the caller).
void StopReconciler(Running* r, bool remove) {
  if (r->reconciler) {
    absl::Status s = r->reconciler->Stop(remove);
    if (!s.ok())
      LogError("could not remove the resource on exit", {{"error", std::string(s.message())}});
  }
  r->reconciler.reset();
}

// Keeps each generation's counts (and labels) on this Node.
class StaticMode : public Mode {
 public:
  explicit StaticMode(const ModeContext& ctx) : ctx_(ctx) {}

  const char* name() const override { return "static"; }

  absl::Status Start(const Generation& gen) override {
    if (gen.config().node_name.empty()) {
      return absl::InvalidArgumentError(
          "static mode needs this node's name: set nodeName, --node-name or NODE_NAME (in a pod, "
          "from the downward API: spec.nodeName)");
    }
    std::lock_guard<std::mutex> lock(mu_);
    return StartAll(ctx_, gen, {}, Watcher(gen, {}), &health(), &running_);
  }

  // The lock is held across the whole swap: a scrape waits for the new
  // reconciler rather than reading a stopped one.
  absl::Status Reload(const Generation& /*running*/, const Generation& next) override {
    std::lock_guard<std::mutex> lock(mu_);
    const apiserver::Capacities before =
        running_.reconciler ? running_.reconciler->desired() : apiserver::Capacities{};
    std::vector<health::HealthWatcher::Outage> carried = health().StopForReplacement();
    StopReconciler(&running_, false);
    return StartAll(ctx_, next, before, Watcher(next, std::move(carried)), &health(), &running_);
  }

  void Stop(const Generation& last, StopFor /*why*/) override {
    health().Stop();
    std::lock_guard<std::mutex> lock(mu_);
    StopReconciler(&running_, last.config().static_mode.remove_on_exit);
  }

  void RenderMetrics(PromText* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    RenderStaticMetrics(running_, p);
  }

  bool Ready(std::string* why) override {
    std::lock_guard<std::mutex> lock(mu_);
    return StaticReady(running_, why);
  }

  bool Alive(std::string* /*why*/) override { return true; }  // the watcher is asked apart

 private:
  // `gen`'s health watcher, carrying `carried`.
  StartWatcher Watcher(const Generation& gen, std::vector<health::Outage> carried) {
    return [this, &gen, carried = std::move(carried)](auto on_change) mutable {
      return WatchHealth(gen, std::move(carried), {std::move(on_change), nullptr});
    };
  }

  const ModeContext& ctx_;
  std::mutex mu_;
  Running running_;  // protected by mu_
};

}  // namespace

ModeEnd RunStaticMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen) {
  StaticMode mode(ctx);
  return RunMode(ctx, std::move(gen), mode);
}

}  // namespace gpu_agent
