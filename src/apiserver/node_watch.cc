#include "apiserver/node_watch.h"

#include <algorithm>

#include "apiserver/line_buffer.h"
#include "apiserver/node_client.h"
#include "base/backoff.h"
#include "base/duration.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::apiserver {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A watch that ends sooner than this without delivering anything did not
// really run: it counts as a failure and the next one waits.
constexpr std::chrono::seconds kShortestWatch{1};

}  // namespace

absl::StatusOr<NodeWatchClients> CreateNodeWatchClients(const Connection& connection,
                                                        const RestOptions& rest,
                                                        std::chrono::milliseconds watch_timeout) {
  NodeWatchClients out;
  absl::StatusOr<std::unique_ptr<RestClient>> list = RestClient::Create(connection, rest);
  if (!list.ok()) return list.status();
  out.rest = *std::move(list);
  RestOptions watch_opts = rest;
  // A watch of a quiet Node may send nothing until the server ends it.
  watch_opts.read_timeout = 2 * watch_timeout + std::chrono::minutes(1);
  absl::StatusOr<std::unique_ptr<RestClient>> watch = RestClient::Create(connection, watch_opts);
  if (!watch.ok()) return watch.status();
  out.watch = *std::move(watch);
  return out;
}

NodeWatch::NodeWatch(NodeWatchOptions options, RestClient* rest, RestClient* watch_rest,
                     NodeWatchCallbacks callbacks, NodeWatchStats* stats)
    : options_(std::move(options)),
      rest_(rest),
      watch_rest_(watch_rest),
      callbacks_(std::move(callbacks)),
      stats_(stats != nullptr ? stats : &own_stats_) {
  thread_ = std::thread([this] {
    if (!options_.thread_name.empty()) NameThisThread(options_.thread_name);
    Loop();
  });
}

NodeWatch::~NodeWatch() { Stop(); }

void NodeWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // A cancel can land just before the loop opens its next stream or LIST;
  // repeat it until the loop says it is out.
  for (;;) {
    watch_rest_->Cancel();
    rest_->Cancel();
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; })) break;
  }
  thread_.join();
}

bool NodeWatch::Wait(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  if (d.count() > 0) cv_.wait_for(lock, d, [this] { return stop_; });
  return !stop_;
}

bool NodeWatch::Stopped() { return !Wait(std::chrono::milliseconds(0)); }

void NodeWatch::Loop() {
  struct Done {
    NodeWatch* self;
    ~Done() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->done_ = true;
      self->cv_.notify_all();
    }
  } done{this};
  const std::string& p = options_.log_prefix;
  NodeClient lister(rest_, options_.node);
  std::string version;  // where the next watch starts; empty: list first
  bool may_list = true;
  // base/backoff's rule, as every watcher's: each sequence starts over only
  // after a quiet stretch, never because a list or an event came, so a
  // server that fails the step after a good one (a bookmark, then 410 or
  // the end, every time) cannot drive a storm. Failed requests and watches:
  gpu_agent::Backoff failures(options_.backoff_initial, options_.backoff_max);
  // Lists after a 410: the first at once, then backed off.
  gpu_agent::Backoff relists(options_.backoff_initial, options_.backoff_max,
                             /*first=*/std::chrono::milliseconds(0));
  std::chrono::milliseconds wait{0};
  auto failed = [&](const std::string& what, const std::string& error,
                    std::chrono::milliseconds at_least = std::chrono::milliseconds(0)) {
    wait = std::max(failures.Next(), at_least);
    LogWarning(
        StrCat(p, what),
        {{"node", options_.node}, {"error", error}, {"retry_in", StrCat(wait.count(), "ms")}});
  };
  auto watch_failed = [&](const std::string& what, const std::string& error,
                          std::chrono::milliseconds at_least = std::chrono::milliseconds(0)) {
    ++stats_->watch_failures;
    failed(what, error, at_least);
  };
  while (Wait(wait)) {
    wait = std::chrono::milliseconds(0);
    if (version.empty() && may_list) {
      ++stats_->lists;
      absl::StatusOr<NodeList> list = lister.List();
      if (!list.ok() && list.status().code() == absl::StatusCode::kPermissionDenied &&
          options_.watch_if_list_forbidden) {
        // An older ClusterRole without `list`: a watch with no version
        // starts with the current Node, at a higher cost to the server.
        may_list = false;
        LogWarning(
            StrCat(p,
                   "may not list nodes: watching without a version instead (it starts with the "
                   "whole Node); grant nodes list (see manifests/static/agent/rbac.yaml)"),
            {{"node", options_.node}, {"error", std::string(list.status().message())}});
        continue;
      }
      if (!list.ok()) {
        failed(options_.list_failed, std::string(list.status().message()));
        continue;
      }
      if (list->items.empty()) {
        failed(options_.list_failed,
               StrCat("node \"", options_.node,
                      "\" not found (the API server lists no node of that name); check ",
                      options_.node_flag));
        continue;
      }
      version = list->resource_version;
      if (callbacks_.on_node) callbacks_.on_node(std::move(list->items.front()));
      if (Stopped()) return;
    }
    const auto timeout = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(Spread(options_.watch_timeout, 1, 2))
               .count());
    ++stats_->watches;
    const std::string from = version;
    bool expired = false;
    std::string expired_message, error_event;
    LineBuffer buffer;
    const auto started = SteadyClock::now();
    absl::StatusOr<int> status = watch_rest_->Stream(
        lister.WatchPath(version, std::chrono::seconds(timeout)), std::chrono::seconds(timeout),
        [&](std::string_view chunk) {
          if (Stopped()) return false;
          buffer.Append(chunk);
          while (std::optional<std::string> line = buffer.NextLine()) {
            if (line->empty()) continue;
            absl::StatusOr<WatchEvent> ev = ParseWatchEvent(*line);
            if (!ev.ok()) {
              LogWarning(StrCat(p, "unreadable watch event ignored"),
                         {{"node", options_.node}, {"error", std::string(ev.status().message())}});
              continue;
            }
            switch (ev->type) {
              case WatchEvent::Type::kError:
                if (ev->code == 410) {
                  expired = true;
                  expired_message = ev->message;
                } else {
                  error_event = StrCat("error event ", ev->code, ": ", ev->message);
                }
                return false;
              case WatchEvent::Type::kBookmark:
                version = ev->resource_version;
                if (callbacks_.on_in_sync) callbacks_.on_in_sync();
                break;
              case WatchEvent::Type::kDeleted:
                version = ev->resource_version;
                if (callbacks_.on_deleted) callbacks_.on_deleted();
                break;
              case WatchEvent::Type::kAdded:
              case WatchEvent::Type::kModified:
                version = ev->resource_version;
                if (callbacks_.on_node) callbacks_.on_node(std::move(ev->node));
                break;
            }
          }
          if (buffer.pending() > kMaxObjectBytes) {
            error_event = "a watch event over the size limit";
            return false;
          }
          return true;
        });
    if (Stopped()) return;
    if (!expired && status.ok() && *status == 410) expired = true;  // answered outside the stream
    if (expired) {
      // The server no longer holds `from`: list again, at once the first
      // time, after a backoff if it happens again before a good watch.
      ++stats_->watch_expired;
      wait = relists.Next();
      if (wait.count() == 0) {
        LogWarning(StrCat(p,
                          "node watch: the API server no longer has this version (410 Gone); "
                          "listing the node again"),
                   {{"node", options_.node},
                    {"version", from.empty() ? "none" : from},
                    {"server", expired_message}});
      }
      version.clear();
      continue;
    }
    if (!error_event.empty()) {
      version.clear();  // after an error event, start over from a LIST
      watch_failed("node watch ended with an error; retrying", error_event);
      continue;
    }
    if (!status.ok()) {
      // The connection was lost: the first retry is spread out.
      watch_failed("node watch broke off; watching again", std::string(status.status().message()),
                   failures.Quiet() ? Spread(options_.reconnect_spread, 0, 1)
                                    : std::chrono::milliseconds(0));
      continue;
    }
    if (*status != 200) {
      watch_failed("node watch failed; retrying", StrCat("HTTP ", *status));
      continue;
    }
    // Ended within a second, with or without an event: a watch the server
    // keeps runs to its timeout.
    if (SteadyClock::now() - started < kShortestWatch) {
      watch_failed("node watch ended at once; retrying", "the server closed it within a second");
      continue;
    }
    // A watch that ran its course: renew it from the last version seen.
    if (callbacks_.on_in_sync) callbacks_.on_in_sync();
  }
}

}  // namespace gpu_agent::apiserver
