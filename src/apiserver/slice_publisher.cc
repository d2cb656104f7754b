#include "apiserver/slice_publisher.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "apiserver/discovery.h"
#include "apiserver/line_buffer.h"
#include "apiserver/node.h"
#include "apiserver/node_watch.h"
#include "base/backoff.h"
#include "base/duration.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/text.h"
#include "base/thread_name.h"

namespace gpu_agent::apiserver {
namespace {

using Ms = std::chrono::milliseconds;

using json::Member;

std::string StringAt(const rapidjson::Value& v, const char* a, const char* b) {
  const rapidjson::Value* x = Member(v, a);
  return x ? json::String(*x, b) : "";
}

// A slice as the publisher holds it: JSON this process wrote, or that it
// re-serialised after a bounded parse (base/json), so parsing it again
// cannot fail on depth or size. Unparseable text reads as null.
rapidjson::Document ParseHeld(const std::string& text) {
  rapidjson::Document d;
  (void)json::Parse(text, "a ResourceSlice", &d);
  return d;
}

// Every member `want` sets is in `have` with the same value; members only
// `have` holds (defaults the server adds) do not count.
// Recursive, over documents of bounded depth (base/json).
bool Covers(const rapidjson::Value& have, const rapidjson::Value& want) {
  if (want.IsObject()) {
    if (!have.IsObject()) return false;
    for (const auto& m : want.GetObject()) {
      auto it = have.FindMember(m.name);
      if (it == have.MemberEnd() || !Covers(it->value, m.value)) return false;
    }
    return true;
  }
  if (want.IsArray()) {
    if (!have.IsArray() || have.Size() != want.Size()) return false;
    for (rapidjson::SizeType i = 0; i < want.Size(); ++i) {
      if (!Covers(have[i], want[i])) return false;
    }
    return true;
  }
  return have == want;
}

std::string SpecString(const rapidjson::Value& slice, const char* key) {
  const rapidjson::Value* spec = Member(slice, "spec");
  return spec ? json::String(*spec, key) : "";
}

int64_t PoolGeneration(const rapidjson::Value& slice) {
  const rapidjson::Value* spec = Member(slice, "spec");
  const rapidjson::Value* pool = spec ? Member(*spec, "pool") : nullptr;
  const rapidjson::Value* g = pool ? Member(*pool, "generation") : nullptr;
  return g && g->IsInt64() ? g->GetInt64() : 0;
}

std::string StatusMessage(const HttpResponse& r) {
  return StrCat(r.status, ": ", json::MessageOf(r.body));
}

// How long a server has answered nothing but 403: from the first 403 of a
// run; any other answer (or Reset) starts it over.
class ForbiddenSpell {
 public:
  std::chrono::steady_clock::duration Answered(int status) {
    if (status != 403) {
      Reset();
      return {};
    }
    const auto now = std::chrono::steady_clock::now();
    if (since_ == std::chrono::steady_clock::time_point{}) since_ = now;
    return now - since_;
  }
  void Reset() { since_ = {}; }

 private:
  std::chrono::steady_clock::time_point since_{};  // the epoch: not refused
};

// What a refused request's log line says: the server's message; for a 403
// what is known of it: the server's authorizer refused, which a server does
// for a few seconds after its start while its RBAC caches fill; once it has
// refused for `for_good` (`forbidden_for`), that the role lacks the
// permission.
std::string Refusal(const HttpResponse& r, const char* verb,
                    std::chrono::steady_clock::duration forbidden_for, Ms for_good) {
  std::string out = StatusMessage(r);
  if (r.status != 403) return out;
  if (forbidden_for < for_good) {
    return StrCat(out,
                  " (the API server's authorization refused it; a server that has just started "
                  "does so until it has loaded its RBAC rules)");
  }
  return StrCat(out, " (refused for ",
                FormatDuration(std::chrono::duration_cast<Ms>(forbidden_for)),
                " now: the agent's ClusterRole must allow ", verb,
                " on resourceslices of resource.k8s.io; see manifests/dra/agent/rbac.yaml)");
}

// A watch that ends sooner than this with no event ended at once: a
// failure, backed off.
constexpr std::chrono::seconds kShortestWatch{1};

// A Retry-After past this is taken as the server's mistake.
constexpr Ms kMaxRetryAfter = std::chrono::minutes(5);

}  // namespace

absl::StatusOr<SliceWatchEvent> ParseSliceWatchEvent(std::string_view line) {
  rapidjson::Document ev;
  if (absl::Status s = json::Parse(line, "a ResourceSlice watch event", &ev); !s.ok()) return s;
  const rapidjson::Value* type = Member(ev, "type");
  const rapidjson::Value* object = Member(ev, "object");
  if (type == nullptr || !type->IsString()) {
    return absl::InvalidArgumentError("a ResourceSlice watch event without a type");
  }
  if (object == nullptr || !object->IsObject()) {
    return absl::InvalidArgumentError("a ResourceSlice watch event without an object");
  }
  SliceWatchEvent out;
  out.type.assign(type->GetString(), type->GetStringLength());
  if (out.type == "ERROR") {
    const rapidjson::Value* code = Member(*object, "code");
    out.code = code != nullptr && code->IsInt() ? code->GetInt() : 0;
  } else {
    out.name = StringAt(*object, "metadata", "name");
    out.resource_version = StringAt(*object, "metadata", "resourceVersion");
    out.driver = SpecString(*object, "driver");
    out.node_name = SpecString(*object, "nodeName");
  }
  out.object = json::Serialize(*object);
  return out;
}

// What the thread knows: the slices on the server (by name, as last seen),
// the version to watch from, and what is wanted.
class SlicePublisher::State {
 public:
  std::map<std::string, std::string> have;  // name -> object JSON
  std::string version;
  std::map<std::string, std::string> want;  // name -> object JSON
  int64_t generation = 0;                   // 0: not yet decided

  // Whether the slice `name` is as wanted (absent when unwanted).
  bool Matches(const std::string& name) const {
    auto w = want.find(name);
    auto h = have.find(name);
    if (w == want.end()) return h == have.end();
    if (h == have.end()) return false;
    const rapidjson::Document wd = ParseHeld(w->second), hd = ParseHeld(h->second);
    const rapidjson::Value* ws = Member(wd, "spec");
    const rapidjson::Value* hs = Member(hd, "spec");
    if (!ws || !hs || !Covers(*hs, *ws)) return false;
    // The owner, once the agent names one.
    const rapidjson::Value* wm = Member(wd, "metadata");
    const rapidjson::Value* hm = Member(hd, "metadata");
    const rapidjson::Value* wo = wm ? Member(*wm, "ownerReferences") : nullptr;
    if (wo == nullptr) return true;
    const rapidjson::Value* ho = hm ? Member(*hm, "ownerReferences") : nullptr;
    return ho && Covers(*ho, *wo);
  }
  bool AllMatch() const {
    for (const auto& [name, _] : want) {
      if (!Matches(name)) return false;
    }
    for (const auto& [name, _] : have) {
      if (!want.count(name)) return false;
    }
    return true;
  }
  void Want(const std::vector<std::string>& slices) { want = ByName(slices); }
  // Whether `slices` are those wanted, byte for byte.
  bool Wants(const std::vector<std::string>& slices) const { return ByName(slices) == want; }

 private:
  static std::map<std::string, std::string> ByName(const std::vector<std::string>& slices) {
    std::map<std::string, std::string> out;
    for (const std::string& s : slices) out[StringAt(ParseHeld(s), "metadata", "name")] = s;
    return out;
  }
};

// What the taint probe has learned, and when it is asked again.
struct SlicePublisher::TaintProbe {
  bool answered = false;  // a clear answer came
  bool kept = false;      // ... and it is that the server keeps taints
  bool none = false;      // ... and the None effect
  // Asked with a None taint beside the NoSchedule one; a server that
  // refuses that (a 1.33 to 1.35 one with taints on) is asked again without.
  bool with_none = true;
  Ms backoff{0};
  std::chrono::steady_clock::time_point due;
  std::string last_failure;  // the kind of the last failure, logged once
  ForbiddenSpell forbidden;  // the probe's 403s in a row
};

absl::StatusOr<std::unique_ptr<SlicePublisher>> SlicePublisher::Start(const Connection& connection,
                                                                      const RestOptions& rest,
                                                                      SlicePublisherOptions options,
                                                                      SliceBuilder desired) {
  absl::StatusOr<NodeWatchClients> clients =
      CreateNodeWatchClients(connection, rest, options.watch_timeout);
  if (!clients.ok()) return clients.status();
  std::unique_ptr<SlicePublisher> p(
      new SlicePublisher(std::move(options), std::move(clients->rest), std::move(clients->watch)));
  p->desired_ = std::move(desired);
  SlicePublisher* raw = p.get();
  p->thread_ = std::thread([raw] {
    NameThisThread("dra-slices");
    raw->Run();
    {
      std::lock_guard<std::mutex> lock(raw->mu_);
      raw->done_ = true;
    }
    raw->cv_.notify_all();
  });
  p->kicker_ = std::thread([raw] {
    NameThisThread("dra-slices-kick");
    raw->Kick();
  });
  return p;
}

SlicePublisher::SlicePublisher(SlicePublisherOptions options, std::unique_ptr<RestClient> rest,
                               std::unique_ptr<RestClient> watch)
    : options_(std::move(options)), rest_(std::move(rest)), watch_(std::move(watch)) {}

SlicePublisher::~SlicePublisher() { Stop(); }

void SlicePublisher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (kicker_.joinable()) kicker_.join();
}

void SlicePublisher::SetDesired(SliceBuilder desired) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    desired_ = std::move(desired);
    changed_ = true;
  }
  cv_.notify_all();  // a watch in progress is cancelled by Kick
}

void SlicePublisher::Kick() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return done_ || stopped_ || (changed_ && watching_); });
    if (done_) return;
    // A cancel can land just before the loop opens its stream (or, on a
    // stop, a request): repeated until the loop is out of it.
    const bool all = stopped_;
    lock.unlock();
    watch_->Cancel();
    if (all) rest_->Cancel();
    lock.lock();
    cv_.wait_for(lock, Ms(50), [this] { return done_ || (!stopped_ && !watching_); });
  }
}

bool SlicePublisher::Stopped() {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

bool SlicePublisher::Pause(Ms d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopped_ || changed_; });
  return !stopped_;
}

bool SlicePublisher::PauseUntilStopped(Ms d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopped_; });
  return !stopped_;
}

bool SlicePublisher::Discover(SliceContext* context, TaintProbe* probe) {
  context->api_version = options_.api_version;
  Backoff backoff(options_.backoff_initial, options_.backoff_max);
  while (context->api_version.empty()) {
    absl::StatusOr<HttpResponse> r = rest_->Get("/apis/resource.k8s.io");
    std::string why;
    if (!r.ok()) {
      why = std::string(r.status().message());
    } else if (r->status != 200) {
      why = StrCat("GET /apis/resource.k8s.io answered ", StatusMessage(*r),
                   " (DRA needs Kubernetes 1.32 or later)");
    } else if (absl::StatusOr<std::string> v =
                   PickServedVersion(r->body, "resource.k8s.io", {"v1", "v1beta2", "v1beta1"});
               v.ok()) {
      context->api_version = *v;
    } else {
      why = std::string(v.status().message());
    }
    if (!why.empty()) {
      ++stats_.errors;
      LogWarning("ResourceSlices: cannot tell which resource.k8s.io version to use; retrying",
                 {{"error", why}});
      if (!Pause(backoff.Next())) return false;
    }
  }
  if (std::string why; !ReadNodeUid(&context->node_uid, &why)) {
    // The slices go out without an owner (the kubelet still removes them);
    // Run asks again before each watch until it knows it.
    LogWarning(
        "ResourceSlices: cannot read the Node for its UID; publishing without an owner until it "
        "can be read",
        {{"node", options_.node}, {"error", why}});
  }
  probe->backoff = options_.backoff_initial;
  if (options_.probe_device_taints) {
    AskAboutTaints(context->api_version, probe);
  } else {
    probe->answered = true;
  }
  context->device_taints = probe->answered && probe->kept;
  context->none_taint_effect = context->device_taints && probe->none;
  LogInfo("publishing ResourceSlices",
          {{"version", "resource.k8s.io/" + context->api_version}, {"node", options_.node}});
  return !Stopped();
}

bool SlicePublisher::ReadNodeUid(std::string* uid, std::string* why) {
  absl::StatusOr<HttpResponse> node = rest_->Get(StrCat("/api/v1/nodes/", options_.node));
  if (!node.ok()) {
    *why = std::string(node.status().message());
    return false;
  }
  if (node->status != 200) {
    *why = StatusMessage(*node);
    return false;
  }
  rapidjson::Document d;
  if (absl::Status s = json::Parse(node->body, "the API server's Node", &d); !s.ok()) {
    *why = std::string(s.message());
    return false;
  }
  *uid = StringAt(d, "metadata", "uid");
  if (uid->empty()) *why = "the Node has no metadata.uid";
  return !uid->empty();
}

void SlicePublisher::AskAboutTaints(const std::string& api_version, TaintProbe* probe) {
  const bool basic = api_version == "v1beta1";
  const std::string taints = StrCat(
      R"("taints":[{"key":")", options_.driver, R"(/probe","effect":"NoSchedule"})",
      probe->with_none ? StrCat(R"(,{"key":")", options_.driver, R"(/probe-none","effect":"None"})")
                       : "",
      "]");
  // generateName: the server cuts the prefix so that the name it makes is
  // valid however long the node's name (up to 253 characters); a dry run
  // makes one too, and stores nothing.
  const std::string body =
      StrCat(R"({"apiVersion":"resource.k8s.io/)", api_version,
             R"(","kind":"ResourceSlice","metadata":{"generateName":")", options_.node,
             R"(-taint-probe-"},"spec":{"driver":")", options_.driver, R"(","nodeName":")",
             options_.node, R"(","pool":{"name":")", options_.node,
             R"(","generation":1,"resourceSliceCount":1},"devices":[{"name":"probe",)",
             basic ? StrCat(R"("basic":{)", taints, "}") : taints, "}]}}");
  absl::StatusOr<HttpResponse> r = rest_->Post(
      StrCat("/apis/resource.k8s.io/", api_version, "/resourceslices?dryRun=All"), body);
  std::string failure;  // why there is no clear answer
  std::string kind;     // its kind: a repeat of the last is not logged again
  int retry_after_s = -1;
  if (!r.ok()) {
    failure = std::string(r.status().message());
    kind = "no answer";
  } else if ((r->status == 400 || r->status == 422) && probe->with_none) {
    // Refused with a None taint: a server that keeps taints but knows no
    // None effect (before 1.36). Asked again at once without it.
    probe->with_none = false;
    LogInfo(
        "ResourceSlices: the API server refuses the None taint effect; degraded devices are "
        "published without a taint",
        {{"node", options_.node}, {"answer", StatusMessage(*r)}});
    AskAboutTaints(api_version, probe);
    return;
  } else if (r->status == 400 || r->status == 422) {
    // The server refuses the slice as invalid. A server that does not know
    // the field drops it and answers 201, so this is its validation (or an
    // admission policy) refusing a tainted device: the real slices' taints
    // would be refused the same way, and asking again gets the same answer.
    // A clear "taints cannot be used".
    probe->answered = true;
    probe->kept = false;
    LogWarning(
        "ResourceSlices: the API server refuses a slice with a device taint; an unhealthy device "
        "leaves the slices",
        {{"node", options_.node}, {"error", StatusMessage(*r)}});
    return;
  } else if (r->status < 200 || r->status >= 300) {
    // No answer about taints: a role without `create` on resourceslices (the
    // slices' own creates fail the same way until an operator grants it),
    // a throttle or an unavailable server.
    const std::chrono::steady_clock::duration forbidden_for = probe->forbidden.Answered(r->status);
    failure = Refusal(*r, "create", forbidden_for, options_.forbidden_for_good);
    // A 403 that lasts is news once more: then the role is named.
    kind = StrCat(r->status, forbidden_for >= options_.forbidden_for_good ? " lasting" : "");
    retry_after_s = r->retry_after_s;
  } else {
    rapidjson::Document d;
    const absl::Status parsed = json::Parse(r->body, "the dry-run slice", &d);
    const rapidjson::Value* spec = parsed.ok() ? Member(d, "spec") : nullptr;
    const rapidjson::Value* devices = spec ? Member(*spec, "devices") : nullptr;
    const rapidjson::Value* device =
        devices && devices->IsArray() && devices->Size() == 1 ? &(*devices)[0] : nullptr;
    if (device && basic) device = Member(*device, "basic");
    if (device == nullptr || !device->IsObject()) {
      failure = StrCat(r->status, " with no slice of one device: ",
                       parsed.ok() ? Printable(r->body, 200) : std::string(parsed.message()));
      kind = "unreadable";
    } else {
      const rapidjson::Value* kept = Member(*device, "taints");
      probe->answered = true;
      probe->kept = kept && kept->IsArray() && kept->Size() >= 1;
      probe->none = probe->kept && probe->with_none && kept->Size() == 2;
      LogInfo(!probe->kept ? "ResourceSlices: the API server drops device taints (feature gate "
                             "DRADeviceTaints off); an unhealthy device leaves the slices"
              : probe->none
                  ? "ResourceSlices: the API server keeps device taints, the None effect too; an "
                    "unhealthy or degraded device stays in the slices with its taint"
                  : "ResourceSlices: the API server keeps device taints; an unhealthy device stays "
                    "in the slices with its taint",
              {{"node", options_.node}});
      return;
    }
  }
  if (Stopped()) return;  // cut off by the stop: nothing to report
  ++stats_.errors;
  Ms wait = std::chrono::duration_cast<Ms>(Jitter(probe->backoff));
  if (retry_after_s >= 0) {
    wait = std::max(wait, std::min<Ms>(std::chrono::seconds(retry_after_s), kMaxRetryAfter));
  }
  probe->due = std::chrono::steady_clock::now() + wait;
  // Up to the watch's own timeout: a probe that keeps failing (a role that
  // stays without the right) costs one request a watch.
  probe->backoff = std::min(probe->backoff * 2, options_.watch_timeout);
  // The same failure again is not news: one warning, then debug lines.
  const bool repeat = kind == probe->last_failure;
  probe->last_failure = kind;
  Log(repeat ? LogLevel::kDebug : LogLevel::kWarning,
      "ResourceSlices: cannot tell whether the API server keeps device taints; unhealthy devices "
      "leave the slices until it answers; asking again",
      {{"node", options_.node}, {"error", failure}, {"retry_in", FormatDuration(wait)}});
}

void SlicePublisher::Run() {
  SliceContext context;
  TaintProbe probe;
  if (!Discover(&context, &probe)) return;
  const std::string base = StrCat("/apis/resource.k8s.io/", context.api_version, "/resourceslices");
  const std::string selector =
      StrCat("fieldSelector=spec.nodeName%3D", options_.node, "%2Cspec.driver%3D", options_.driver);
  const std::string list_path = StrCat(base, "?", selector);
  State s;
  bool listed = false;
  // base/backoff's rule: each starts over only after a quiet stretch, never
  // on a success alone, so a server that fails the step after a good one
  // (a list, then a watch answered 410 at once) cannot drive a storm.
  // Failed requests:
  Backoff backoff(options_.backoff_initial, options_.backoff_max);
  // Lists after a watch the server no longer had the version of: the first
  // at once (a server restart, an old version), the next ones backed off.
  Backoff relists(options_.backoff_initial, options_.backoff_max, /*first=*/Ms(0));
  // Writes after a watch event showed a slice changed by someone else: the
  // first at once, a fight backed off.
  Backoff repairs(options_.backoff_initial, options_.backoff_max, /*first=*/Ms(0));
  // A failed request: logged, then everything is listed again after `wait`
  // (the next of `backoff` when not given), or after the server's
  // Retry-After when that is longer.
  auto fail = [&](const std::string& what, const std::string& why, int retry_after_s = -1,
                  std::optional<Ms> given = std::nullopt) {
    ++stats_.errors;
    stats_.in_sync = false;
    Ms wait = given ? *given : backoff.Next();
    if (retry_after_s >= 0) {
      wait = std::max(wait, std::min<Ms>(std::chrono::seconds(retry_after_s), kMaxRetryAfter));
    }
    LogWarning("ResourceSlices: " + what + "; retrying", {{"node", options_.node},
                                                          {"driver", options_.driver},
                                                          {"error", why},
                                                          {"retry_in", FormatDuration(wait)}});
    listed = false;
    // Only a stop ends the wait early: a change meanwhile (a health flap,
    // a reload) is published after it, or every change would be a request
    // to a server that asked to be left alone.
    return PauseUntilStopped(wait);
  };
  // While the Node's UID is unknown (its GET failed at the start), it is
  // asked again before a watch once this is due, with a backoff of its own;
  // the watches are kept no longer than the wait meanwhile.
  Ms owner_backoff = options_.backoff_initial;
  auto owner_due = std::chrono::steady_clock::now() + Jitter(owner_backoff);
  // The server's 403s in a row (a list that succeeds ends them).
  ForbiddenSpell forbidden;
  // A request the server refused or that got no answer.
  auto fail_request = [&](const std::string& what, const absl::StatusOr<HttpResponse>& r,
                          const char* verb) {
    return fail(what,
                r.ok()
                    ? Refusal(*r, verb, forbidden.Answered(r->status), options_.forbidden_for_good)
                    : std::string(r.status().message()),
                r.ok() ? r->retry_after_s : -1);
  };
  // The builder as it is now; `take_change`: a change posted meanwhile is
  // in what it builds, so it is taken.
  auto builder = [&](bool take_change) {
    std::lock_guard<std::mutex> lock(mu_);
    if (take_change) changed_ = false;
    return desired_;
  };
  // The desired slices: what `build` makes at `generation`.
  auto want_at = [&](const SliceBuilder& build, int64_t generation) {
    context.generation = generation;
    s.Want(build(context));
    stats_.generation = s.generation;
  };
  // A change posted (or a context changed): the builder's slices under the
  // next generation where they differ from those wanted. Input that makes
  // the same slices (an unhealthy device's new reason where taints are
  // dropped and it is not in them) publishes nothing. Whether they differ.
  auto take_desired = [&] {
    const SliceBuilder build = builder(/*take_change=*/true);
    context.generation = s.generation;
    if (s.Wants(build(context))) return false;
    ++s.generation;
    want_at(build, s.generation);
    return true;
  };
  // A slice of this node and driver: the only ones the agent keeps.
  auto ours = [&](const rapidjson::Value& slice) {
    return SpecString(slice, "driver") == options_.driver &&
           SpecString(slice, "nodeName") == options_.node;
  };
  // A watch is kept no longer than until `due` (a retry's).
  auto watch_until = [](std::chrono::seconds timeout, std::chrono::steady_clock::time_point due) {
    return std::min(
        timeout, std::chrono::ceil<std::chrono::seconds>(due - std::chrono::steady_clock::now()));
  };
  while (!Stopped()) {
    if (!listed) {
      ++stats_.lists;
      absl::StatusOr<HttpResponse> r = rest_->Get(list_path);
      if (!r.ok() || r->status != 200) {
        if (!fail_request("cannot list them", r, "list")) return;
        continue;
      }
      rapidjson::Document d;
      const absl::Status parsed = json::Parse(r->body, "the ResourceSlice list", &d);
      const rapidjson::Value* items = Member(d, "items");
      if (!parsed.ok() || items == nullptr || !items->IsArray()) {
        if (!fail("cannot list them",
                  parsed.ok() ? "the answer is not a list" : std::string(parsed.message()))) {
          return;
        }
        continue;
      }
      s.have.clear();
      int64_t highest = 0;
      size_t others = 0;
      for (const auto& item : items->GetArray()) {
        // Only this node's slices of this driver are the agent's to keep
        // (or delete): a server or proxy that ignored the field selector
        // must not make it touch another node's.
        if (!ours(item)) {
          ++others;
          continue;
        }
        s.have[StringAt(item, "metadata", "name")] = json::Serialize(item);
        highest = std::max(highest, PoolGeneration(item));
      }
      if (others > 0) {
        LogWarning(
            "ResourceSlices: the list held slices of another node or driver (the server ignored "
            "the field selector); left alone",
            {{"node", options_.node}, {"driver", options_.driver}, {"others", StrCat(others)}});
      }
      s.version = StringAt(d, "metadata", "resourceVersion");
      listed = true;
      forbidden.Reset();
      if (s.generation == 0) {
        // First list: slices already as wanted keep their generation;
        // otherwise the next one is published.
        const SliceBuilder build = builder(/*take_change=*/true);
        want_at(build, std::max<int64_t>(highest, 1));
        s.generation = s.AllMatch() ? context.generation : highest + 1;
        if (s.generation != context.generation) want_at(build, s.generation);
        stats_.generation = s.generation;
      }
    }
    bool change_posted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      change_posted = changed_;
    }
    if (change_posted) take_desired();
    // Reconcile: create, replace and delete what differs.
    bool ok = true;
    for (const auto& [name, json] : s.want) {
      if (s.Matches(name)) continue;
      auto have = s.have.find(name);
      absl::StatusOr<HttpResponse> r;
      if (have == s.have.end()) {
        r = rest_->Post(base, json);
        ++stats_.creates;
      } else {
        rapidjson::Document body = ParseHeld(json);
        const std::string rv = StringAt(ParseHeld(have->second), "metadata", "resourceVersion");
        body["metadata"].AddMember("resourceVersion",
                                   rapidjson::Value(rv.c_str(), body.GetAllocator()),
                                   body.GetAllocator());
        r = rest_->Put(StrCat(base, "/", EscapePathSegment(name)), json::Serialize(body));
        ++stats_.updates;
      }
      if (!r.ok() || (r->status != 200 && r->status != 201)) {
        // A 409 (someone else created or changed it) is settled by the list
        // that follows.
        ok = false;
        const char* verb = have == s.have.end() ? "create" : "update";
        if (!fail_request(StrCat("cannot ", verb, " ", name), r, verb)) return;
        break;
      }
      // As the server now holds it (within base/json's bounds); an answer
      // that cannot be read leaves the state unknown: listed again.
      rapidjson::Document stored;
      if (!json::Parse(r->body, "the stored ResourceSlice", &stored).ok() || !stored.IsObject()) {
        s.have.erase(name);
        listed = false;
        break;
      }
      s.have[name] = json::Serialize(stored);
    }
    if (!ok) continue;
    for (auto it = s.have.begin(); it != s.have.end();) {
      if (s.want.count(it->first)) {
        ++it;
        continue;
      }
      ++stats_.deletes;
      absl::StatusOr<HttpResponse> r =
          rest_->Delete(StrCat(base, "/", EscapePathSegment(it->first)));
      if (!r.ok() || (r->status != 200 && r->status != 404)) {
        ok = false;
        if (!fail_request(StrCat("cannot delete ", it->first), r, "delete")) return;
        break;
      }
      it = s.have.erase(it);
    }
    if (!ok) continue;
    stats_.in_sync = true;
    if (!probe.answered && std::chrono::steady_clock::now() >= probe.due) {
      AskAboutTaints(context.api_version, &probe);
      if (Stopped()) return;
      if (probe.kept) {
        // Unhealthy devices stay in the slices, tainted, from now on.
        context.device_taints = true;
        context.none_taint_effect = probe.none;
        if (take_desired()) continue;
      }
    }
    if (context.node_uid.empty() && std::chrono::steady_clock::now() >= owner_due) {
      if (std::string why; ReadNodeUid(&context.node_uid, &why)) {
        // The same slices with their owner: replaced, same generation.
        LogInfo("ResourceSlices: read the Node's UID; the slices get their owner",
                {{"node", options_.node}});
        want_at(builder(/*take_change=*/false), s.generation);
        continue;
      } else {
        // Up to the watch's own timeout: a Node that stays unreadable (a
        // role without `get nodes`, a wrong node name) costs one GET a watch.
        owner_backoff = std::min(owner_backoff * 2, options_.watch_timeout);
        const Ms wait = std::chrono::duration_cast<Ms>(Jitter(owner_backoff));
        owner_due = std::chrono::steady_clock::now() + wait;
        LogWarning(
            "ResourceSlices: still cannot read the Node for its UID; the slices stay without an "
            "owner",
            {{"node", options_.node}, {"error", why}, {"retry_in", FormatDuration(wait)}});
      }
    }
    // Watch from the list's version (or the last event's) until an event
    // shows a difference, the server ends the watch, or a change or a stop
    // cancels it.
    auto timeout =
        std::chrono::duration_cast<std::chrono::seconds>(Spread(options_.watch_timeout, 1.0, 2.0));
    if (context.node_uid.empty()) timeout = watch_until(timeout, owner_due);
    if (!probe.answered) timeout = watch_until(timeout, probe.due);
    const std::string watch_path =
        StrCat(list_path,
               "&watch=1&allowWatchBookmarks=true&resourceVersion=", EscapePathSegment(s.version),
               "&timeoutSeconds=", std::max<int64_t>(1, timeout.count()));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      if (changed_) continue;
      watching_ = true;
    }
    ++stats_.watches;
    LineBuffer buffer;
    bool repair = false, expired = false;
    const auto watch_started = std::chrono::steady_clock::now();
    std::string error_event;
    std::string head;  // the answer's start: a refusal's Status
    int retry_after_s = -1;
    constexpr size_t kHead = 1024;
    auto on_chunk = [&](std::string_view chunk) {
      if (Stopped()) return false;
      if (head.size() < kHead) head.append(chunk.substr(0, kHead - head.size()));
      buffer.Append(chunk);
      while (std::optional<std::string> line = buffer.NextLine()) {
        absl::StatusOr<SliceWatchEvent> ev = ParseSliceWatchEvent(*line);
        if (!ev.ok()) continue;
        if (ev->type == "ERROR") {
          if (ev->code == 410) {
            expired = true;
          } else {
            error_event = ev->object;
          }
          return false;
        }
        if (!ev->resource_version.empty()) s.version = ev->resource_version;
        if (ev->type == "BOOKMARK") continue;
        if (ev->driver != options_.driver || ev->node_name != options_.node) continue;
        const std::string& name = ev->name;
        if (ev->type == "DELETED") {
          s.have.erase(name);
        } else {
          s.have[name] = std::move(ev->object);
        }
        if (!s.Matches(name)) {
          repair = true;
          return false;
        }
      }
      if (buffer.pending() > kMaxObjectBytes) {
        error_event = StrCat("a watch event over the ", kMaxObjectBytes, "-byte limit");
        return false;
      }
      return true;
    };
    absl::StatusOr<int> status =
        watch_->Stream(watch_path, std::chrono::seconds(std::max<int64_t>(1, timeout.count())),
                       on_chunk, &retry_after_s);
    {
      std::lock_guard<std::mutex> lock(mu_);
      watching_ = false;
    }
    cv_.notify_all();
    if (Stopped()) return;
    if (status.ok() && *status == 410) expired = true;  // as an answer, not an event
    if (expired) {
      ++stats_.watch_expired;
      if (const Ms wait = relists.Next(); wait.count() > 0) {
        if (!fail("the watch expired again soon after a list", "410 Gone", retry_after_s, wait)) {
          return;
        }
        continue;
      }
      listed = false;  // list again, at once
      continue;
    }
    if (repair) {
      ++stats_.repairs;
      stats_.in_sync = false;
      if (const Ms wait = repairs.Next(); wait.count() > 0) {
        // Someone keeps changing the slices back: a fight is not fought at
        // the speed of the watch.
        LogWarning("ResourceSlices: a slice was changed by someone else again; writing it back",
                   {{"node", options_.node},
                    {"driver", options_.driver},
                    {"retry_in", FormatDuration(wait)}});
        if (!PauseUntilStopped(wait)) return;
      }
      continue;
    }
    if (!error_event.empty()) {
      if (!fail("the watch failed", error_event)) return;
      continue;
    }
    if (!status.ok()) {
      // A change cancels the watch: not a failure.
      bool changed;
      {
        std::lock_guard<std::mutex> lock(mu_);
        changed = changed_;
      }
      if (changed) continue;
      if (!fail("the watch broke off", std::string(status.status().message()))) return;
      continue;
    }
    if (*status != 200) {
      if (!fail("cannot watch them",
                Refusal(HttpResponse{*status, head}, "watch", forbidden.Answered(*status),
                        options_.forbidden_for_good),
                retry_after_s)) {
        return;
      }
      continue;
    }
    // A server (or a proxy) that ends every watch at once (with or without
    // an event in it) would otherwise be watched again at once, for good;
    // a watch the server keeps ends at its timeout.
    if (std::chrono::steady_clock::now() - watch_started < kShortestWatch) {
      if (!fail("the watch ended at once", "the server closed it within a second")) return;
    }
  }
}

}  // namespace gpu_agent::apiserver
