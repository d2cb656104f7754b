#include "health/node_health_reporter.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>

#include <condition_variable>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "apiserver/node_client.h"
#include "apiserver/node_condition.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"
#include "health/thread_count.h"

namespace gpu_agent::health {
namespace {

using Key = std::pair<std::string, std::string>;  // uuid, check

ThreadCount& Threads() {
  static ThreadCount* count = new ThreadCount;  // never destroyed: threads may end at exit
  return *count;
}

std::string GpuName(const GpuHealthNote& n) {
  return n.index >= 0 ? StrCat("GPU ", n.index, " (", n.uuid, ")") : StrCat("GPU ", n.uuid);
}

}  // namespace

std::string NodeEventJson(const std::string& node, const std::string& ns, const std::string& name,
                          const std::string& reason, const std::string& type,
                          const std::string& message, const std::string& now) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  auto field = [&w](const char* key, std::string_view value) { json::WriteField(w, key, value); };
  w.StartObject();
  field("apiVersion", "v1");
  field("kind", "Event");
  w.Key("metadata");
  w.StartObject();
  field("name", name);
  field("namespace", ns);
  w.EndObject();
  // As the kubelet refers to its Node (kubectl describe node finds events
  // by this reference: the UID is the node's name).
  w.Key("involvedObject");
  w.StartObject();
  field("apiVersion", "v1");
  field("kind", "Node");
  field("name", node);
  field("uid", node);
  w.EndObject();
  field("reason", reason);
  field("message", message);
  field("type", type);
  w.Key("source");
  w.StartObject();
  field("component", "gpu-agent");
  field("host", node);
  w.EndObject();
  field("reportingComponent", "gpu-agent");
  field("reportingInstance", node);
  field("firstTimestamp", now);
  field("lastTimestamp", now);
  w.Key("count");
  w.Int(1);
  w.EndObject();
  return json::TextOf(buf);
}

std::string GpuHealthyConditionPatch(bool healthy, const std::string& reason,
                                     const std::string& message, const std::string& now,
                                     const std::string& transition) {
  return apiserver::NodeConditionPatch(
      {"GpuHealthy", healthy ? "True" : "False", reason, message, now, transition});
}

struct NodeHealthReporter::State {
  State(std::unique_ptr<apiserver::RestClient> r, NodeHealthReporterOptions o)
      : rest(std::move(r)), options(std::move(o)), clock(options.clock) {}

  const std::unique_ptr<apiserver::RestClient> rest;
  const NodeHealthReporterOptions options;
  const Clock* const clock;

  struct Track {
    GpuHealthNote now;                           // the latest note
    Severity sent = Severity::kOk;               // what the last event said
    std::optional<Clock::TimePoint> last_event;  // when it was sent
    bool dirty = false;                          // `now` not yet told
  };

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // protected by mu
  // The sending thread, joined by Stop() (under join_mu: two Stops join once).
  std::mutex join_mu;
  std::thread thread;
  std::map<Key, Track> tracks;    // protected by mu
  bool condition_dirty = false;   // protected by mu
  NodeHealthReporterStats stats;  // protected by mu
  // The sending thread's alone.
  std::optional<Clock::TimePoint> condition_retry_at;
  std::set<int> said_event_error, said_condition_error;
  std::string written_condition;  // "True"/"False" + message last written
  bool written_healthy = true;
  std::string transition_time;
  uint64_t serial = 0;

  // At start: a GpuHealthy condition other than True on the Node (left by
  // an agent before this one) is set right; with none, nothing is written
  // until a GPU fails a check. An unreadable Node is written to.
  void ReadStartingCondition() {
    absl::StatusOr<apiserver::HttpResponse> r = rest->Get(StrCat("/api/v1/nodes/", options.node));
    bool stale = true;
    if (r.ok() && r->status == 200) {
      json::Document d;
      const bool parsed = json::Parse(r->body, "the API server's Node", &d).ok();
      stale = false;
      const rapidjson::Value* status = parsed ? json::Member(d, "status") : nullptr;
      const rapidjson::Value* conditions = status ? json::Member(*status, "conditions") : nullptr;
      if (conditions != nullptr && conditions->IsArray()) {
        for (const auto& c : conditions->GetArray()) {
          if (json::String(c, "type") == "GpuHealthy") {
            stale = json::String(c, "status") != "True";
            written_healthy = !stale;
          }
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    if (stale) condition_dirty = true;
  }

  void Run() {
    ReadStartingCondition();
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      const Clock::TimePoint now = clock->Now();
      std::vector<std::pair<GpuHealthNote, Severity>> to_send;  // note, level before
      std::optional<Clock::TimePoint> next;
      auto sooner = [&](Clock::TimePoint t) { next = next ? std::min(*next, t) : t; };
      for (auto& [key, t] : tracks) {
        if (!t.dirty) continue;
        if (t.last_event && *t.last_event + options.event_interval > now) {
          sooner(*t.last_event + options.event_interval);
          continue;
        }
        t.dirty = false;
        if (t.now.level == t.sent) {
          ++stats.events_coalesced;  // undone within the minute: nothing to tell
          continue;
        }
        to_send.push_back({t.now, t.sent});
        t.sent = t.now.level;
        t.last_event = now;
      }
      bool write_condition = false;
      std::vector<GpuHealthNote> failing;
      if (condition_dirty && (!condition_retry_at || *condition_retry_at <= now)) {
        write_condition = true;
        condition_dirty = false;
        for (const auto& [key, t] : tracks) {
          if (t.now.level != Severity::kOk) failing.push_back(t.now);
        }
      } else if (condition_dirty) {
        sooner(*condition_retry_at);
      }
      if (!to_send.empty() || write_condition) {
        lock.unlock();
        for (const auto& [note, before] : to_send) SendEvent(note, before);
        bool ok = true;
        if (write_condition) ok = WriteCondition(failing);
        lock.lock();
        if (write_condition && !ok) {
          condition_dirty = true;
          // From the attempt's start, as read before it: a clock that moved
          // while the answer came (a test's, once the error is counted)
          // must not push the retry past its due time.
          condition_retry_at = now + options.retry;
        } else if (write_condition) {
          condition_retry_at.reset();
        }
        continue;  // look again: notes may have come meanwhile
      }
      // Waits are real; a fake clock is looked at again on Wake() or within 1 s.
      std::chrono::milliseconds wait(1000);
      if (next) wait = std::min(wait, std::max(clock->Until(*next), std::chrono::milliseconds(1)));
      cv.wait_for(lock, wait);
    }
  }

  void SendEvent(const GpuHealthNote& n, Severity before) {
    std::string reason, type;
    std::string message;
    if (n.level == Severity::kOk) {
      reason = "GpuRecovered";
      type = "Normal";
      message = StrCat(GpuName(n), ": ", n.check, " passes again (was ", SeverityName(before), ")");
      if (!n.value.empty()) StrAppend(&message, ": ", n.value);
    } else {
      reason = n.level == Severity::kUnhealthy ? "GpuUnhealthy" : "GpuDegraded";
      type = "Warning";
      message = StrCat(GpuName(n), ": ", n.check, " ", SeverityName(n.level), ": ", n.value);
    }
    const std::string& node = options.node;
    const std::string name = StrCat(node, ".gpu-agent.",
                                    std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                            .count() +
                                        static_cast<int64_t>(++serial));
    const std::string body = NodeEventJson(node, options.event_namespace, name, reason, type,
                                           message, apiserver::Rfc3339Now());
    absl::StatusOr<apiserver::HttpResponse> r =
        rest->Post(StrCat("/api/v1/namespaces/", options.event_namespace, "/events"), body,
                   "application/json", /*repeatable=*/true);  // a duplicate event beats a lost one
    const int code = r.ok() ? r->status : 0;
    std::lock_guard<std::mutex> lock(mu);
    if (code == 201 || code == 200) {
      ++stats.events_sent;
      return;
    }
    ++stats.events_refused;
    if (!stop && said_event_error.insert(code).second) {
      const std::string why =
          r.ok() ? std::string(apiserver::ExplainAnswer(*r, node, "create events", body).message())
                 : std::string(r.status().message());
      LogWarning(
          "the API server did not take a GPU health event; going on without it (said once "
          "per answer code)",
          {{"reason", reason},
           {"code", StrCat(code)},
           {"rbac", "events: create (in namespace " + options.event_namespace + ")"},
           {"error", why}});
    }
  }

  bool WriteCondition(const std::vector<GpuHealthNote>& failing) {
    const bool healthy = failing.empty();
    std::string message, reason;
    if (healthy) {
      reason = "GpuChecksPass";
      message = "no GPU health check is failing";
    } else {
      bool unhealthy = false;
      for (const GpuHealthNote& n : failing) {
        unhealthy |= n.level == Severity::kUnhealthy;
        StrAppend(&message, message.empty() ? "" : "; ", GpuName(n), ": ", n.check, " ",
                  SeverityName(n.level), " (", n.value, ")");
      }
      reason = unhealthy ? "GpuUnhealthy" : "GpuDegraded";
      if (message.size() > 1024) message = message.substr(0, 1021) + "...";
    }
    const std::string key = StrCat(healthy ? "True" : "False", reason, message);
    if (key == written_condition) return true;
    const std::string now = apiserver::Rfc3339Now();
    if (transition_time.empty() || healthy != written_healthy) transition_time = now;
    const std::string body =
        GpuHealthyConditionPatch(healthy, reason, message, now, transition_time);
    absl::StatusOr<apiserver::HttpResponse> r =
        rest->Patch(StrCat("/api/v1/nodes/", options.node, "/status"), body,
                    apiserver::kStrategicMergePatch, /*repeatable=*/true);
    const int code = r.ok() ? r->status : 0;
    std::lock_guard<std::mutex> lock(mu);
    if (code == 200) {
      ++stats.condition_writes;
      written_condition = key;
      written_healthy = healthy;
      return true;
    }
    ++stats.condition_errors;
    if (!stop && said_condition_error.insert(code).second) {
      const std::string why =
          r.ok()
              ? std::string(apiserver::ExplainAnswer(*r, options.node, "patch nodes/status", body)
                                .message())
              : std::string(r.status().message());
      LogWarning(
          "could not write the Node's GpuHealthy condition; trying again (said once per "
          "answer code)",
          {{"node", options.node}, {"code", StrCat(code)}, {"error", why}});
    }
    return false;
  }
};

absl::StatusOr<std::unique_ptr<NodeHealthReporter>> NodeHealthReporter::Start(
    apiserver::Connection connection, NodeHealthReporterOptions options) {
  if (options.node.empty()) {
    return absl::InvalidArgumentError("GPU health events need this node's name");
  }
  absl::StatusOr<std::unique_ptr<apiserver::RestClient>> rest =
      apiserver::RestClient::Create(std::move(connection), options.rest);
  if (!rest.ok()) return rest.status();
  auto state = std::make_unique<State>(*std::move(rest), std::move(options));
  // Joined by Stop(), which the reporter's destructor calls: the state the
  // thread uses outlives it.
  State* s = state.get();
  s->thread = std::thread([s] {
    ThreadCount::Scope counted(&Threads());
    NameThisThread("node-health");
    s->Run();
  });
  return std::unique_ptr<NodeHealthReporter>(new NodeHealthReporter(std::move(state)));
}

NodeHealthReporter::NodeHealthReporter(std::unique_ptr<State> s) : state_(std::move(s)) {}

NodeHealthReporter::~NodeHealthReporter() { Stop(); }

int NodeHealthReporter::ThreadsRunning() { return Threads().running(); }

void NodeHealthReporter::Note(const GpuHealthNote& note) {
  std::lock_guard<std::mutex> lock(state_->mu);
  State::Track& t = state_->tracks[{note.uuid, note.check}];
  if (t.dirty && t.now.level != note.level) ++state_->stats.events_coalesced;
  t.now = note;
  t.dirty = true;
  state_->condition_dirty = true;
  state_->cv.notify_all();
}

void NodeHealthReporter::Wake() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->cv.notify_all();
}

void NodeHealthReporter::Stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->cv.notify_all();
  }
  // A request in flight (or just starting) ends at once, and any later one
  // fails at once: the thread then sees `stop`.
  state_->rest->Cancel();
  std::lock_guard<std::mutex> join(state_->join_mu);
  if (state_->thread.joinable()) state_->thread.join();
}

NodeHealthReporterStats NodeHealthReporter::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

}  // namespace gpu_agent::health
