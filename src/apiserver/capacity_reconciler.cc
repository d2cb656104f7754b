#include "apiserver/capacity_reconciler.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <random>
#include <set>

#include "apiserver/node_client.h"
#include "base/duration.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

using Clock = std::chrono::steady_clock;

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string Describe(const Capacities& c) {
  std::string out;
  for (const auto& [r, v] : c) StrAppend(&out, out.empty() ? "" : ", ", r, "=", v);
  return out;
}

std::string DescribeSeen(const NodeView& node, const Capacities& want) {
  std::string out;
  for (const auto& [r, v] : want) {
    StrAppend(&out, out.empty() ? "" : ", ", r, "=", node.Capacity(r).value_or("unset"));
  }
  return out;
}

}  // namespace

CapacityReconciler::CapacityReconciler(Connection c, ReconcilerOptions o, Capacities desired)
    : connection_(std::move(c)), options_(std::move(o)), desired_(std::move(desired)) {}

absl::StatusOr<std::unique_ptr<CapacityReconciler>> CapacityReconciler::Start(
    Connection connection, ReconcilerOptions options, Capacities desired) {
  std::unique_ptr<CapacityReconciler> r(
      new CapacityReconciler(connection, std::move(options), std::move(desired)));
  absl::StatusOr<std::unique_ptr<RestClient>> rest =
      RestClient::Create(connection, r->options_.rest);
  if (!rest.ok()) return rest.status();
  r->rest_ = *std::move(rest);
  RestOptions watch_opts = r->options_.rest;
  // A watch is quiet for long stretches: only the connect is timed.
  watch_opts.read_timeout = std::chrono::minutes(6);
  absl::StatusOr<std::unique_ptr<RestClient>> watch_rest =
      RestClient::Create(connection, watch_opts);
  if (!watch_rest.ok()) return watch_rest.status();
  r->watch_rest_ = *std::move(watch_rest);
  CapacityReconciler* raw = r.get();
  r->loop_ = std::thread([raw] { raw->Loop(); });
  r->watch_ = std::thread([raw] { raw->WatchLoop(); });
  return r;
}

CapacityReconciler::~CapacityReconciler() { (void)Stop(false); }

Capacities CapacityReconciler::desired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return desired_;
}

void CapacityReconciler::SetDesired(Capacities value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [r, v] : desired_) value.emplace(r, 0);
    if (desired_ == value) return;
    desired_ = value;
    dirty_ = true;
    fighting_ = false;  // a real change deserves a fresh try
    resets_.clear();
  }
  cv_.notify_all();
}

void CapacityReconciler::NoteReset() {
  // REQUIRES: mu_ held.
  const auto now = Clock::now();
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

absl::Status CapacityReconciler::ReconcileOnce(std::optional<NodeView> node) {
  NodeClient client(rest_.get(), options_.node);
  Capacities desired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    desired = desired_;
  }
  absl::StatusOr<NodeClient::Applied> applied = client.Apply(
      [&](const NodeView& n) { return PlanSetCapacities(n, desired, options_.allocatable); },
      std::move(node));
  stats_.patches += client.patches_sent();
  if (!applied.ok()) return applied.status();
  if (applied->patched) {
    LogInfo("node capacity set", {{"node", options_.node},
                                  {"set", Describe(desired)},
                                  {"was", DescribeSeen(applied->before, desired)}});
  }
  stats_.last_success_unix = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  std::lock_guard<std::mutex> lock(mu_);
  resource_version_ = applied->after.resource_version;
  last_seen_ok_ = true;  // the Node at this version has the value
  ever_set_ = ever_set_ || applied->patched;
  cv_.notify_all();
  return absl::OkStatus();
}

void CapacityReconciler::Loop() {
  auto backoff = options_.backoff_initial;
  auto next_resync = Clock::now() + options_.resync;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_until(lock, next_resync, [this] { return stop_ || dirty_ || pending_view_; });
    if (stop_) break;
    std::optional<NodeView> view = std::move(pending_view_);
    pending_view_.reset();
    const bool timer = !dirty_ && !view;
    dirty_ = false;
    lock.unlock();
    absl::Status s = ReconcileOnce(timer ? std::nullopt : std::move(view));
    lock.lock();
    if (s.ok()) {
      backoff = options_.backoff_initial;
      next_resync = Clock::now() + options_.resync;
      continue;
    }
    ++stats_.errors;
    LogWarning("could not reconcile node capacity; will retry",
               {{"node", options_.node},
                {"error", std::string(s.message())},
                {"retry_in", StrCat(backoff.count(), "ms")}});
    next_resync = Clock::now() + Jitter(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
    dirty_ = false;
  }
}

void CapacityReconciler::WatchLoop() {
  struct Done {
    CapacityReconciler* self;
    ~Done() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->watch_done_ = true;
      self->cv_.notify_all();
    }
  } done{this};
  auto backoff = options_.backoff_initial;
  while (true) {
    std::string rv;
    {
      // List, then watch: start only from a version a read established, so
      // no stale state arrives as an event.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !resource_version_.empty(); });
      if (stop_) return;
      rv = resource_version_;
    }
    std::string path = StrCat("/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=300",
                              "&fieldSelector=", UrlEncode("metadata.name=" + options_.node));
    if (!rv.empty()) StrAppend(&path, "&resourceVersion=", rv);
    std::string buffer;
    bool gone = false;
    absl::StatusOr<int> status = watch_rest_->Stream(path, [&](std::string_view chunk) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return false;
      }
      buffer.append(chunk);
      if (buffer.size() > kMaxObjectBytes) {
        LogWarning("watch event over the size limit; restarting the watch");
        return false;
      }
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        const std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        rapidjson::Document ev;
        ev.Parse<rapidjson::kParseIterativeFlag>(line.data(), line.size());
        if (ev.HasParseError() || !ev.IsObject() || !ev.HasMember("type") ||
            !ev["type"].IsString() || !ev.HasMember("object") || !ev["object"].IsObject()) {
          LogWarning("unreadable watch event ignored");
          continue;
        }
        const std::string type = ev["type"].GetString();
        const rapidjson::Value& obj = ev["object"];
        if (type == "ERROR") {
          if (obj.HasMember("code") && obj["code"].IsInt() && obj["code"].GetInt() == 410) {
            gone = true;  // too old: list again
            return false;
          }
          continue;
        }
        if (type == "BOOKMARK") {
          if (obj.HasMember("metadata") && obj["metadata"].HasMember("resourceVersion") &&
              obj["metadata"]["resourceVersion"].IsString()) {
            std::lock_guard<std::mutex> lock(mu_);
            resource_version_ = obj["metadata"]["resourceVersion"].GetString();
          }
          continue;
        }
        rapidjson::StringBuffer sb;
        rapidjson::Writer<rapidjson::StringBuffer> w(sb);
        obj.Accept(w);
        absl::StatusOr<NodeView> node = ParseNode(std::string_view(sb.GetString(), sb.GetSize()));
        if (!node.ok()) continue;
        std::lock_guard<std::mutex> lock(mu_);
        resource_version_ = node->resource_version;
        bool drift = false;
        for (const auto& [r, v] : desired_) {
          const std::string want = StrCat(v);
          drift |=
              node->Capacity(r) != want || (options_.allocatable && node->Allocatable(r) != want);
        }
        // A reset is a change from the desired value to another one.
        const bool was_ok = last_seen_ok_;
        last_seen_ok_ = !drift;
        if (!drift) continue;
        if (was_ok) NoteReset();
        if (fighting_) continue;
        ++stats_.drift_repairs;
        LogInfo("node capacity drifted; repairing", {{"node", options_.node},
                                                     {"seen", DescribeSeen(*node, desired_)},
                                                     {"want", Describe(desired_)}});
        pending_view_ = *std::move(node);
        cv_.notify_all();
      }
      return true;
    });
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      if (gone) {
        // The version is too old: read the Node again (the reconcile loop
        // does, and records the new version), then watch from there.
        resource_version_.clear();
        dirty_ = true;
        cv_.notify_all();
        continue;
      }
    }
    if (status.ok() && *status == 200) {
      backoff = options_.backoff_initial;
      continue;  // the server ended the watch (timeoutSeconds): watch again
    }
    LogWarning(
        "node watch failed; retrying",
        {{"node", options_.node},
         {"error", status.ok() ? StrCat("HTTP ", *status) : std::string(status.status().message())},
         {"retry_in", StrCat(backoff.count(), "ms")}});
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, Jitter(backoff), [this] { return stop_; });
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

absl::Status CapacityReconciler::Stop(bool remove) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !loop_.joinable()) return absl::OkStatus();
    stop_ = true;
  }
  cv_.notify_all();
  // A cancel can land just before the watch opens its next stream; repeat
  // it until the watch thread says it is out.
  for (;;) {
    watch_rest_->Cancel();
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return watch_done_; })) break;
  }
  if (loop_.joinable()) loop_.join();
  if (watch_.joinable()) watch_.join();
  if (!remove) return absl::OkStatus();
  NodeClient client(rest_.get(), options_.node);
  std::set<std::string> resources;
  for (const auto& [r, v] : desired()) resources.insert(r);
  absl::StatusOr<NodeClient::Applied> applied = client.Apply(
      [&](const NodeView& n) { return PlanRemoveCapacities(n, resources, options_.allocatable); });
  if (!applied.ok()) return applied.status();
  if (applied->patched) {
    LogInfo("removed the resource from the node on exit",
            {{"node", options_.node}, {"resources", StrJoin(resources, ", ")}});
  }
  return absl::OkStatus();
}

}  // namespace gpu_agent::apiserver
