// The reconciler's watch of its Node (see capacity_reconciler.h): LIST,
// WATCH from the list's version, every state seen handed to Observe.
#include <algorithm>

#include "apiserver/capacity_reconciler.h"
#include "apiserver/line_buffer.h"
#include "apiserver/node_client.h"
#include "base/duration.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

using Clock = std::chrono::steady_clock;

// A watch that ends sooner than this without delivering anything did not
// really run: it counts as a failure and the next one waits.
constexpr std::chrono::seconds kShortestWatch{1};

}  // namespace

void CapacityReconciler::WatchLoop() {
  struct Done {
    CapacityReconciler* self;
    ~Done() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->watch_done_ = true;
      self->cv_.notify_all();
    }
  } done{this};
  NodeClient lister(rest_.get(), options_.node);
  std::string version;  // where the next watch starts; empty: list first
  bool may_list = true;
  int failures = 0;        // attempts in a row that failed or ended at once
  int expired_in_row = 0;  // 410s with no good watch between them
  std::chrono::milliseconds wait{0};
  auto failed = [&](const char* what, const std::string& error,
                    std::chrono::milliseconds at_least = std::chrono::milliseconds(0)) {
    ++failures;
    wait = std::max(Backoff(failures), at_least);
    LogWarning(
        what,
        {{"node", options_.node}, {"error", error}, {"retry_in", StrCat(wait.count(), "ms")}});
  };
  auto watch_failed = [&](const char* what, const std::string& error,
                          std::chrono::milliseconds at_least = std::chrono::milliseconds(0)) {
    ++stats_.watch_failures;
    failed(what, error, at_least);
  };
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (wait.count() > 0) cv_.wait_for(lock, wait, [this] { return stop_; });
      if (stop_) return;
    }
    wait = std::chrono::milliseconds(0);
    if (version.empty() && may_list) {
      ++stats_.lists;
      absl::StatusOr<NodeList> list = lister.List();
      if (!list.ok() && list.status().code() == absl::StatusCode::kPermissionDenied) {
        // An older ClusterRole without `list`: a watch with no version
        // starts with the current Node, at a higher cost to the server.
        may_list = false;
        LogWarning(
            "may not list nodes: watching without a version instead (it starts with the whole "
            "Node); grant nodes list (see manifests/static/agent/rbac.yaml)",
            {{"node", options_.node}, {"error", std::string(list.status().message())}});
        continue;
      }
      if (!list.ok()) {
        failed("cannot read the node; will retry", std::string(list.status().message()));
        continue;
      }
      if (list->items.empty()) {
        failed("cannot read the node; will retry",
               StrCat("node \"", options_.node,
                      "\" not found (the API server lists no node of that name); check --node / "
                      "NODE_NAME"));
        continue;
      }
      version = list->resource_version;
      Observe(std::move(list->items.front()));
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    const auto timeout = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(Spread(options_.watch_timeout, 1, 2))
               .count());
    ++stats_.watches;
    const std::string from = version;
    bool delivered = false, expired = false;
    std::string expired_message, error_event;
    LineBuffer buffer;
    const auto started = Clock::now();
    absl::StatusOr<int> status = watch_rest_->Stream(
        lister.WatchPath(version, std::chrono::seconds(timeout)), [&](std::string_view chunk) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (stop_) return false;
          }
          buffer.Append(chunk);
          while (std::optional<std::string> line = buffer.NextLine()) {
            if (line->empty()) continue;
            absl::StatusOr<WatchEvent> ev = ParseWatchEvent(*line);
            if (!ev.ok()) {
              LogWarning("unreadable watch event ignored",
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
              case WatchEvent::Type::kBookmark: {
                version = ev->resource_version;
                delivered = true;
                std::lock_guard<std::mutex> lock(mu_);
                if (last_seen_ok_) MarkInSync();
                break;
              }
              case WatchEvent::Type::kDeleted: {
                version = ev->resource_version;
                delivered = true;
                LogWarning("the node was deleted; waiting for it to come back",
                           {{"node", options_.node}});
                std::lock_guard<std::mutex> lock(mu_);
                last_seen_ok_ = false;
                break;
              }
              case WatchEvent::Type::kAdded:
              case WatchEvent::Type::kModified:
                version = ev->resource_version;
                delivered = true;
                Observe(std::move(ev->node));
                break;
            }
          }
          if (buffer.pending() > kMaxObjectBytes) {
            error_event = "a watch event over the size limit";
            return false;
          }
          return true;
        });
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    // A watch that delivered, or ran longer than the longest backoff, was a
    // good one whatever ended it (a load balancer cuts idle ones): the
    // failure counts start over.
    if (delivered || Clock::now() - started >= options_.backoff_max) {
      failures = 0;
      expired_in_row = 0;
    }
    if (!expired && status.ok() && *status == 410) expired = true;  // answered outside the stream
    if (expired) {
      // The server no longer holds `from`: list again, at once the first
      // time, after a backoff if it happens again before a good watch.
      ++stats_.watch_expired;
      if (expired_in_row++ == 0) {
        LogWarning(
            "node watch: the API server no longer has this version (410 Gone); listing "
            "the node again",
            {{"node", options_.node},
             {"version", from.empty() ? "none" : from},
             {"server", expired_message}});
      } else {
        ++failures;
        wait = Backoff(failures);
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
      watch_failed(
          "node watch broke off; watching again", std::string(status.status().message()),
          failures == 0 ? Spread(options_.reconnect_spread, 0, 1) : std::chrono::milliseconds(0));
      continue;
    }
    if (*status != 200) {
      watch_failed("node watch failed; retrying", StrCat("HTTP ", *status));
      continue;
    }
    if (!delivered && Clock::now() - started < kShortestWatch) {
      watch_failed("node watch ended at once; retrying", "the server closed it with no event");
      continue;
    }
    // A watch that ran its course: renew it from the last version seen.
    failures = 0;
    expired_in_row = 0;
    std::lock_guard<std::mutex> lock(mu_);
    if (last_seen_ok_) MarkInSync();
  }
}

}  // namespace gpu_agent::apiserver
