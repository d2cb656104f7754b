#include "apiserver/reflector.h"

#include <rapidjson/document.h>

#include <algorithm>

#include "apiserver/line_buffer.h"
#include "apiserver/node.h"
#include "apiserver/status.h"
#include "base/duration.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// A watch that ends sooner than this without the owner ending it did not
// really run: a failure, and the next one waits.
constexpr std::chrono::seconds kShortestWatch{1};

// A Retry-After past this is taken as the server's mistake.
constexpr Ms kMaxRetryAfter = std::chrono::minutes(5);

// The start of a refused watch's answer kept for its Status.
constexpr size_t kHead = 1024;

}  // namespace

std::string ReflectorHandler::Refused(int status, const std::string& head) {
  return StatusMessage(HttpResponse{status, head});
}

struct Reflector::WatchEnd {
  absl::StatusOr<int> status = 0;
  int retry_after_s = -1;
  bool expired = false;         // 410, as an answer or an event
  std::string expired_message;  // the server's words for it
  std::string error;            // an ERROR event (not 410), or an event over the limit
  bool ended_by_owner = false;  // OnEvent returned false
  bool at_once = false;         // ended within kShortestWatch
  std::string head;             // the answer's start: a refusal's Status
};

Reflector::Reflector(ReflectorOptions options, ReflectorHandler* handler, RestClient* rest,
                     RestClient* watch, ReflectorStats* stats)
    : options_(std::move(options)),
      handler_(handler),
      rest_(rest),
      watch_(watch),
      stats_(stats != nullptr ? stats : &own_stats_) {}

void Reflector::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
  // Sticky: a request just starting is ended too.
  watch_->Cancel();
  rest_->Cancel();
}

void Reflector::Interrupt() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = true;
  }
  // Outside mu_ (a cancel may wait out a connect in progress). Sticky: the
  // watch in progress ends, or the next one at its start; Run takes a
  // cancelled watch for an interrupt, so one that lands after Run resumed
  // the client costs one more Sync, never a lost change.
  watch_->Cancel();
}

bool Reflector::Cancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool Reflector::Wait(Ms d) {
  std::unique_lock<std::mutex> lock(mu_);
  if (d.count() > 0) cv_.wait_for(lock, d, [this] { return cancelled_; });
  return !cancelled_;
}

void Reflector::Warn(const std::string& message, const Fields& more) {
  std::vector<LogField> fields;
  for (const auto& [k, v] : options_.log_fields) fields.emplace_back(k, v);
  for (const auto& [k, v] : more) fields.emplace_back(k, v);
  Log(LogLevel::kWarning, options_.log_prefix + message,
      std::span<const LogField>(fields.data(), fields.size()));
}

Ms Reflector::Fail(const ReflectorFailure& f, gpu_agent::Backoff* failures, std::optional<Ms> given,
                   Ms at_least) {
  handler_->OnFailure();
  Ms wait = std::max(given ? *given : failures->Next(), at_least);
  if (f.retry_after_s >= 0) {
    wait = std::max(wait, std::min<Ms>(std::chrono::seconds(f.retry_after_s), kMaxRetryAfter));
  }
  Warn(f.what + "; retrying", {{"error", f.why}, {"retry_in", FormatDuration(wait)}});
  return wait;
}

struct Reflector::RunState {
  explicit RunState(const ReflectorOptions& o)
      : failures(o.backoff_initial, o.backoff_max),
        relists(o.backoff_initial, o.backoff_max, /*first=*/Ms(0)) {}
  // base/backoff's rule: each sequence starts over only after a quiet
  // stretch, never because a list or an event came, so a server that fails
  // the step after a good one (a list, then a watch answered 410 at once)
  // cannot drive a storm. Failed requests and watches:
  gpu_agent::Backoff failures;
  // Lists after a 410: the first at once, then backed off.
  gpu_agent::Backoff relists;
  std::string version;  // where the next watch starts
  bool listed = false;
  Ms wait{0};  // before the next try
};

void Reflector::Failed(RunState& run, const ReflectorFailure& f, std::optional<Ms> given,
                       Ms at_least) {
  if (Cancelled()) return;  // a request the Cancel ended: no failure
  run.wait = Fail(f, &run.failures, given, at_least);
  if (options_.relist_after_failure) run.listed = false;
}

void Reflector::Run() {
  RunState run(options_);
  while (Wait(run.wait)) {
    run.wait = Ms(0);
    if (!run.listed) {
      ++stats_->lists;
      std::string v;
      if (std::optional<ReflectorFailure> f = handler_->List(&v)) {
        Failed(run, *f);
        run.listed = false;
        continue;
      }
      run.version = std::move(v);
      run.listed = true;
      if (Cancelled()) return;
    }
    {
      // A change posted from here on ends the next watch.
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      interrupted_ = false;
      watch_->Resume();
    }
    std::optional<ReflectorFailure> sync_failure;
    const ReflectorHandler::Next next = handler_->Sync(&sync_failure);
    if (Cancelled()) return;
    if (sync_failure) {
      Failed(run, *sync_failure);
      continue;
    }
    if (next == ReflectorHandler::Next::kList) run.listed = false;
    if (next != ReflectorHandler::Next::kWatch) continue;
    const std::string from = run.version;
    WatchEnd end = WatchOnce(&run.version);
    if (Cancelled()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The owner's: Sync runs at once.
      if (interrupted_ || end.status.status().code() == absl::StatusCode::kCancelled) continue;
    }
    AfterWatch(run, end, from);
  }
}

void Reflector::AfterExpiry(RunState& run, const WatchEnd& end, const std::string& from) {
  ++stats_->watch_expired;
  run.listed = false;
  if (const Ms w = run.relists.Next(); w.count() > 0) {
    if (options_.log_repeated_expiry) {
      Failed(run,
             {options_.watch_name + " expired again soon after a list",
              "the server no longer has the version (410) again", end.retry_after_s},
             w);
    } else {
      run.wait = w;
    }
    return;
  }
  Warn(
      options_.watch_name + ": the API server no longer has this version (410 Gone); listing again",
      {{"version", from.empty() ? "none" : from}, {"server", end.expired_message}});
}

void Reflector::AfterWatch(RunState& run, const WatchEnd& end, const std::string& from) {
  if (end.expired) {
    AfterExpiry(run, end, from);
    return;
  }
  if (end.ended_by_owner) return;
  if (!end.error.empty()) {
    ++stats_->watch_failures;
    run.listed = false;  // after an error event, start over from a LIST
    Failed(run, {options_.watch_name + " ended with an error", end.error});
    return;
  }
  if (!end.status.ok()) {
    // The connection was lost: the first retry is spread out.
    ++stats_->watch_failures;
    const Ms spread = run.failures.Quiet() ? Spread(options_.reconnect_spread, 0, 1) : Ms(0);
    Failed(run, {options_.watch_name + " broke off", std::string(end.status.status().message())},
           std::nullopt, spread);
    return;
  }
  if (*end.status != 200) {
    ++stats_->watch_failures;
    Failed(run,
           {options_.watch_refused, handler_->Refused(*end.status, end.head), end.retry_after_s});
    return;
  }
  // Ended within a second, with or without an event: a watch the server
  // keeps runs to its timeout.
  if (end.at_once) {
    ++stats_->watch_failures;
    Failed(run, {options_.watch_name + " ended at once", "the server closed it within a second"});
    return;
  }
  // A watch that ran its course: renewed from the last version seen.
  handler_->InSync();
}

Reflector::WatchEnd Reflector::WatchOnce(std::string* version) {
  const auto drawn =
      std::chrono::duration_cast<std::chrono::seconds>(Spread(options_.watch_timeout, 1.0, 2.0));
  const std::chrono::seconds timeout = std::max(
      std::chrono::seconds(1), handler_->WatchFor(std::max(std::chrono::seconds(1), drawn)));
  ++stats_->watches;
  WatchEnd end;
  LineBuffer buffer;
  auto on_line = [&](const std::string& line) {
    json::Document ev;
    if (absl::Status s = json::Parse(line, "a watch event", &ev); !s.ok() || !ev.IsObject()) {
      Warn("unreadable watch event ignored",
           {{"error", s.ok() ? "not an object" : std::string(s.message())}});
      return true;
    }
    const std::string type = json::String(ev, "type");
    const rapidjson::Value* object = json::Member(ev, "object");
    if (object == nullptr || !object->IsObject()) {
      Warn("unreadable watch event ignored",
           {{"error", "the event \"" + type + "\" has no object"}});
      return true;
    }
    if (type == "ERROR") {
      const ApiStatus status = ReadStatus(json::Serialize(*object));
      if (status.code == 410) {
        end.expired = true;
        end.expired_message = status.message;
      } else {
        end.error = StrCat("error event ", status.code, ": ", status.message);
      }
      return false;
    }
    const rapidjson::Value* metadata = json::Member(*object, "metadata");
    const std::string rv = metadata ? json::String(*metadata, "resourceVersion") : "";
    if (!rv.empty()) *version = rv;
    if (type == "BOOKMARK") {
      handler_->InSync();
      return true;
    }
    ObjectEvent e;
    if (type == "ADDED") {
      e.type = ObjectEvent::Type::kAdded;
    } else if (type == "MODIFIED") {
      e.type = ObjectEvent::Type::kModified;
    } else if (type == "DELETED") {
      e.type = ObjectEvent::Type::kDeleted;
    } else {
      Warn("unreadable watch event ignored", {{"error", "unknown event type \"" + type + "\""}});
      return true;
    }
    e.resource_version = rv;
    e.object = json::Serialize(*object);
    if (handler_->OnEvent(std::move(e))) return true;
    end.ended_by_owner = true;
    return false;
  };
  const auto started = SteadyClock::now();
  end.status = watch_->Stream(
      handler_->WatchPath(*version, timeout), timeout,
      [&](std::string_view chunk) {
        if (Cancelled()) return false;
        if (end.head.size() < kHead) end.head.append(chunk.substr(0, kHead - end.head.size()));
        buffer.Append(chunk);
        while (std::optional<std::string> line = buffer.NextLine()) {
          if (!line->empty() && !on_line(*line)) return false;
        }
        if (buffer.pending() > kMaxObjectBytes) {
          end.error = StrCat("a watch event over the ", kMaxObjectBytes, "-byte limit");
          return false;
        }
        return true;
      },
      &end.retry_after_s);
  if (!end.expired && end.status.ok() && *end.status == 410) end.expired = true;
  end.at_once = SteadyClock::now() - started < kShortestWatch;
  return end;
}

}  // namespace gpu_agent::apiserver
