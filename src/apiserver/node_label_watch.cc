#include "apiserver/node_label_watch.h"

#include <algorithm>

#include "apiserver/line_buffer.h"
#include "apiserver/node.h"
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

absl::StatusOr<std::unique_ptr<NodeLabelWatch>> NodeLabelWatch::Start(Connection connection,
                                                                      NodeLabelWatchOptions options,
                                                                      OnValue on_value) {
  std::unique_ptr<NodeLabelWatch> w(new NodeLabelWatch(std::move(options), std::move(on_value)));
  absl::StatusOr<std::unique_ptr<RestClient>> rest =
      RestClient::Create(connection, w->options_.rest);
  if (!rest.ok()) return rest.status();
  w->rest_ = *std::move(rest);
  RestOptions watch_opts = w->options_.rest;
  // A watch of a quiet Node may send nothing until the server ends it.
  watch_opts.read_timeout = 2 * w->options_.watch_timeout + std::chrono::minutes(1);
  absl::StatusOr<std::unique_ptr<RestClient>> watch_rest =
      RestClient::Create(connection, watch_opts);
  if (!watch_rest.ok()) return watch_rest.status();
  w->watch_rest_ = *std::move(watch_rest);
  NodeLabelWatch* raw = w.get();
  w->thread_ = std::thread([raw] { raw->Loop(); });
  return w;
}

NodeLabelWatch::~NodeLabelWatch() { Stop(); }

void NodeLabelWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // Cancel until the loop is done: a request may start after one cancel.
  for (;;) {
    watch_rest_->Cancel();
    rest_->Cancel();
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; })) break;
  }
  thread_.join();
}

bool NodeLabelWatch::Wait(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  if (d.count() > 0) cv_.wait_for(lock, d, [this] { return stop_; });
  return !stop_;
}

std::chrono::milliseconds NodeLabelWatch::Backoff(int failures) const {
  auto d = options_.backoff_initial;
  for (int i = 1; i < failures && d < options_.backoff_max; ++i) d *= 2;
  return Jitter(std::min(d, options_.backoff_max));
}

void NodeLabelWatch::Loop() {
  struct Done {
    NodeLabelWatch* self;
    ~Done() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->done_ = true;
      self->cv_.notify_all();
    }
  } mark{this};
  NodeClient client(rest_.get(), options_.node);
  auto report = [this](const NodeView& node) {
    auto it = node.labels.find(options_.label);
    on_value_(it == node.labels.end() ? std::nullopt : std::optional<std::string>(it->second));
  };
  std::string version;  // where the next watch starts; empty: list first
  int failures = 0;
  std::chrono::milliseconds wait{0};
  auto failed = [&](const char* what, const std::string& error,
                    std::chrono::milliseconds at_least = std::chrono::milliseconds(0)) {
    ++failures;
    wait = std::max(Backoff(failures), at_least);
    LogWarning(
        what,
        {{"node", options_.node}, {"error", error}, {"retry_in", StrCat(wait.count(), "ms")}});
  };
  while (Wait(wait)) {
    wait = std::chrono::milliseconds(0);
    if (version.empty()) {
      absl::StatusOr<NodeList> list = client.List();
      if (!list.ok()) {
        failed("node config: cannot list the node; will retry",
               std::string(list.status().message()));
        continue;
      }
      if (list->items.empty()) {
        failed("node config: cannot list the node; will retry",
               StrCat("node \"", options_.node, "\" not found; check --node-name / NODE_NAME"));
        continue;
      }
      version = list->resource_version;
      report(list->items.front());
      if (!Wait(std::chrono::milliseconds(0))) return;
    }
    const auto timeout = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(Spread(options_.watch_timeout, 1, 2))
               .count());
    bool delivered = false, expired = false;
    std::string error_event;
    LineBuffer buffer;
    const auto started = Clock::now();
    absl::StatusOr<int> status = watch_rest_->Stream(
        client.WatchPath(version, std::chrono::seconds(timeout)), [&](std::string_view chunk) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (stop_) return false;
          }
          buffer.Append(chunk);
          while (std::optional<std::string> line = buffer.NextLine()) {
            if (line->empty()) continue;
            absl::StatusOr<WatchEvent> ev = ParseWatchEvent(*line);
            if (!ev.ok()) continue;
            switch (ev->type) {
              case WatchEvent::Type::kError:
                if (ev->code == 410) {
                  expired = true;
                } else {
                  error_event = StrCat("error event ", ev->code, ": ", ev->message);
                }
                return false;
              case WatchEvent::Type::kBookmark:
              case WatchEvent::Type::kDeleted:
                version = ev->resource_version;
                delivered = true;
                break;
              case WatchEvent::Type::kAdded:
              case WatchEvent::Type::kModified:
                version = ev->resource_version;
                delivered = true;
                report(ev->node);
                break;
            }
          }
          if (buffer.pending() > kMaxObjectBytes) {
            error_event = "a watch event over the size limit";
            return false;
          }
          return true;
        });
    if (!Wait(std::chrono::milliseconds(0))) return;
    if (delivered || Clock::now() - started >= options_.backoff_max) failures = 0;
    if (!expired && status.ok() && *status == 410) expired = true;
    if (expired) {
      // List again: at once the first time, after a backoff when it repeats.
      if (failures > 0) wait = Backoff(failures);
      ++failures;
      version.clear();
      continue;
    }
    if (!error_event.empty()) {
      version.clear();
      failed("node config: node watch ended with an error; retrying", error_event);
      continue;
    }
    if (!status.ok()) {
      failed(
          "node config: node watch broke off; watching again",
          std::string(status.status().message()),
          failures == 0 ? Spread(options_.reconnect_spread, 0, 1) : std::chrono::milliseconds(0));
      continue;
    }
    if (*status != 200) {
      failed("node config: node watch failed; retrying", StrCat("HTTP ", *status));
      continue;
    }
    if (!delivered && Clock::now() - started < kShortestWatch) {
      failed("node config: node watch ended at once; retrying",
             "the server closed it with no event");
      continue;
    }
    failures = 0;
  }
}

}  // namespace gpu_agent::apiserver
