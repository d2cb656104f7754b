#include "apiserver/slice_publisher.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "apiserver/discovery.h"
#include "apiserver/node.h"
#include "apiserver/node_watch.h"
#include "apiserver/status.h"
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
  out.object = json::Serialize(*object);
  if (out.type == "ERROR") {
    out.code = ReadStatus(out.object).code;
  } else {
    out.name = StringAt(*object, "metadata", "name");
    out.resource_version = StringAt(*object, "metadata", "resourceVersion");
    out.driver = SpecString(*object, "driver");
    out.node_name = SpecString(*object, "nodeName");
  }
  return out;
}

// What the thread knows: the slices on the server (by name, as last seen)
// and what is wanted.
class SlicePublisher::State {
 public:
  std::map<std::string, std::string> have;  // name -> object JSON
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
  // Up to the watch's own timeout: a probe that keeps failing (a role that
  // stays without the right) costs one request a watch.
  explicit TaintProbe(const SlicePublisherOptions& o)
      : backoff(Backoff::Doubling(o.backoff_initial, o.watch_timeout)) {}
  Backoff backoff;
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
  });
  return p;
}

SlicePublisher::SlicePublisher(SlicePublisherOptions options, std::unique_ptr<RestClient> rest,
                               std::unique_ptr<RestClient> watch)
    : options_(std::move(options)),
      rest_(std::move(rest)),
      watch_(std::move(watch)),
      reflector_(std::make_unique<Reflector>(ReflectorOptionsFor(options_),
                                             static_cast<ReflectorHandler*>(this), rest_.get(),
                                             watch_.get(), &stats_)) {}

SlicePublisher::~SlicePublisher() { Stop(); }

void SlicePublisher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  reflector_->Cancel();  // the request in progress ends, and one just starting
  if (thread_.joinable()) thread_.join();
}

void SlicePublisher::SetDesired(SliceBuilder desired) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    desired_ = std::move(desired);
    changed_ = true;
  }
  cv_.notify_all();
  // The watch in progress, or the next, ends: Sync publishes the change.
  reflector_->Interrupt();
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

bool SlicePublisher::Discover(SliceContext* context, TaintProbe* probe) {
  context->api_version = options_.api_version;
  Backoff backoff(options_.backoff_initial, options_.backoff_max);
  while (context->api_version.empty()) {
    absl::StatusOr<std::string> v = DiscoverResourceApiVersion(rest_.get());
    if (v.ok()) {
      context->api_version = *v;
      break;
    }
    ++stats_.errors;
    LogWarning("ResourceSlices: cannot tell which resource.k8s.io version to use; retrying",
               {{"error", std::string(v.status().message())}});
    if (!Pause(backoff.Next())) return false;
  }
  if (std::string why; !ReadNodeUid(&context->node_uid, &why)) {
    // The slices go out without an owner (the kubelet still removes them);
    // Run asks again before each watch until it knows it.
    LogWarning(
        "ResourceSlices: cannot read the Node for its UID; publishing without an owner until it "
        "can be read",
        {{"node", options_.node}, {"error", why}});
  }
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
  Ms wait = probe->backoff.Next();
  if (retry_after_s >= 0) {
    wait = std::max(wait, std::min<Ms>(std::chrono::seconds(retry_after_s), kMaxRetryAfter));
  }
  probe->due = std::chrono::steady_clock::now() + wait;
  // The same failure again is not news: one warning, then debug lines.
  const bool repeat = kind == probe->last_failure;
  probe->last_failure = kind;
  Log(repeat ? LogLevel::kDebug : LogLevel::kWarning,
      "ResourceSlices: cannot tell whether the API server keeps device taints; unhealthy devices "
      "leave the slices until it answers; asking again",
      {{"node", options_.node}, {"error", failure}, {"retry_in", FormatDuration(wait)}});
}

// What the watch thread holds between the reflector's calls.
struct SlicePublisher::Loop {
  explicit Loop(const SlicePublisherOptions& o)
      : probe(o),
        repairs(o.backoff_initial, o.backoff_max, /*first=*/Ms(0)),
        owner_backoff(Backoff::Doubling(o.backoff_initial, o.watch_timeout)) {}
  SliceContext context;
  TaintProbe probe;
  State s;
  std::string base;       // /apis/resource.k8s.io/<version>/resourceslices
  std::string list_path;  // ... with the node's and driver's field selector
  // The server's 403s in a row (a list that succeeds ends them).
  ForbiddenSpell forbidden;
  // Writes after a watch event showed a slice changed by someone else: the
  // first at once, a fight backed off.
  Backoff repairs;
  bool repair = false;  // a watch event showed one
  // While the Node's UID is unknown (its GET failed at the start), it is
  // asked again before a watch once this is due, with a backoff of its own
  // up to the watch's timeout (a Node that stays unreadable, for a role
  // without `get nodes` or a wrong node name, costs one GET a watch); the
  // watches are kept no longer than the wait meanwhile.
  Backoff owner_backoff;
  std::chrono::steady_clock::time_point owner_due;
};

ReflectorOptions SlicePublisher::ReflectorOptionsFor(const SlicePublisherOptions& o) {
  ReflectorOptions r;
  r.watch_timeout = o.watch_timeout;
  r.backoff_initial = o.backoff_initial;
  r.backoff_max = o.backoff_max;
  // Any failure lists everything again: the slices are written from what
  // the server holds.
  r.relist_after_failure = true;
  r.log_prefix = "ResourceSlices: ";
  r.watch_name = "the watch";
  r.watch_refused = "cannot watch them";
  r.log_fields = {{"node", o.node}, {"driver", o.driver}};
  return r;
}

void SlicePublisher::Run() {
  loop_ = std::make_unique<Loop>(options_);
  if (!Discover(&loop_->context, &loop_->probe)) return;
  loop_->owner_due = std::chrono::steady_clock::now() + loop_->owner_backoff.Next();
  loop_->base = StrCat("/apis/resource.k8s.io/", loop_->context.api_version, "/resourceslices");
  loop_->list_path = StrCat(loop_->base, "?fieldSelector=spec.nodeName%3D", options_.node,
                            "%2Cspec.driver%3D", options_.driver);
  reflector_->Run();
}

void SlicePublisher::OnFailure() {
  ++stats_.errors;
  stats_.in_sync = false;
}

ReflectorFailure SlicePublisher::RequestFailed(const std::string& what,
                                               const absl::StatusOr<HttpResponse>& r,
                                               const char* verb) {
  if (!r.ok()) return {what, std::string(r.status().message())};
  return {what,
          Refusal(*r, verb, loop_->forbidden.Answered(r->status), options_.forbidden_for_good),
          r->retry_after_s};
}

SliceBuilder SlicePublisher::Builder(bool take_change) {
  std::lock_guard<std::mutex> lock(mu_);
  if (take_change) changed_ = false;
  return desired_;
}

void SlicePublisher::WantAt(const SliceBuilder& build, int64_t generation) {
  loop_->context.generation = generation;
  loop_->s.Want(build(loop_->context));
  stats_.generation = loop_->s.generation;
}

bool SlicePublisher::TakeDesired() {
  State& s = loop_->s;
  const SliceBuilder build = Builder(/*take_change=*/true);
  loop_->context.generation = s.generation;
  if (s.Wants(build(loop_->context))) return false;
  ++s.generation;
  WantAt(build, s.generation);
  return true;
}

std::optional<ReflectorFailure> SlicePublisher::List(std::string* version) {
  State& s = loop_->s;
  absl::StatusOr<HttpResponse> r = rest_->Get(loop_->list_path);
  if (!r.ok() || r->status != 200) return RequestFailed("cannot list them", r, "list");
  rapidjson::Document d;
  const absl::Status parsed = json::Parse(r->body, "the ResourceSlice list", &d);
  const rapidjson::Value* items = Member(d, "items");
  if (!parsed.ok() || items == nullptr || !items->IsArray()) {
    return ReflectorFailure{"cannot list them", parsed.ok() ? "the answer is not a list"
                                                            : std::string(parsed.message())};
  }
  s.have.clear();
  int64_t highest = 0;
  size_t others = 0;
  for (const auto& item : items->GetArray()) {
    // Only this node's slices of this driver are the agent's to keep (or
    // delete): a server or proxy that ignored the field selector must not
    // make it touch another node's.
    if (SpecString(item, "driver") != options_.driver ||
        SpecString(item, "nodeName") != options_.node) {
      ++others;
      continue;
    }
    s.have[StringAt(item, "metadata", "name")] = json::Serialize(item);
    highest = std::max(highest, PoolGeneration(item));
  }
  if (others > 0) {
    LogWarning(
        "ResourceSlices: the list held slices of another node or driver (the server ignored the "
        "field selector); left alone",
        {{"node", options_.node}, {"driver", options_.driver}, {"others", StrCat(others)}});
  }
  *version = StringAt(d, "metadata", "resourceVersion");
  loop_->forbidden.Reset();
  if (s.generation == 0) {
    // First list: slices already as wanted keep their generation;
    // otherwise the next one is published.
    const SliceBuilder build = Builder(/*take_change=*/true);
    WantAt(build, std::max<int64_t>(highest, 1));
    s.generation = s.AllMatch() ? loop_->context.generation : highest + 1;
    if (s.generation != loop_->context.generation) WantAt(build, s.generation);
    stats_.generation = s.generation;
  }
  return std::nullopt;
}

ReflectorHandler::Next SlicePublisher::Sync(std::optional<ReflectorFailure>* failure) {
  if (loop_->repair) {
    loop_->repair = false;
    ++stats_.repairs;
    stats_.in_sync = false;
    if (const Ms wait = loop_->repairs.Next(); wait.count() > 0) {
      // Someone keeps changing the slices back: a fight is not fought at
      // the speed of the watch.
      LogWarning("ResourceSlices: a slice was changed by someone else again; writing it back",
                 {{"node", options_.node},
                  {"driver", options_.driver},
                  {"retry_in", FormatDuration(wait)}});
      if (!reflector_->Wait(wait)) return Next::kWatch;
    }
  }
  bool change_posted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    change_posted = changed_;
  }
  if (change_posted) TakeDesired();
  if (const Next n = Reconcile(failure); *failure || n != Next::kWatch) return n;
  stats_.in_sync = true;
  return AskAgain();
}

ReflectorHandler::Next SlicePublisher::Reconcile(std::optional<ReflectorFailure>* failure) {
  State& s = loop_->s;
  // Create and replace what differs.
  for (const auto& [name, json] : s.want) {
    if (s.Matches(name)) continue;
    auto have = s.have.find(name);
    absl::StatusOr<HttpResponse> r;
    if (have == s.have.end()) {
      r = rest_->Post(loop_->base, json);
      ++stats_.creates;
    } else {
      rapidjson::Document body = ParseHeld(json);
      const std::string rv = StringAt(ParseHeld(have->second), "metadata", "resourceVersion");
      body["metadata"].AddMember("resourceVersion",
                                 rapidjson::Value(rv.c_str(), body.GetAllocator()),
                                 body.GetAllocator());
      r = rest_->Put(StrCat(loop_->base, "/", EscapePathSegment(name)), json::Serialize(body));
      ++stats_.updates;
    }
    if (!r.ok() || (r->status != 200 && r->status != 201)) {
      // A 409 (someone else created or changed it) is settled by the list
      // that follows.
      const char* verb = have == s.have.end() ? "create" : "update";
      *failure = RequestFailed(StrCat("cannot ", verb, " ", name), r, verb);
      return Next::kList;
    }
    // As the server now holds it (within base/json's bounds); an answer
    // that cannot be read leaves the state unknown: listed again.
    rapidjson::Document stored;
    if (!json::Parse(r->body, "the stored ResourceSlice", &stored).ok() || !stored.IsObject()) {
      s.have.erase(name);
      return Next::kList;
    }
    s.have[name] = json::Serialize(stored);
  }
  // Delete what is not wanted.
  for (auto it = s.have.begin(); it != s.have.end();) {
    if (s.want.count(it->first)) {
      ++it;
      continue;
    }
    ++stats_.deletes;
    absl::StatusOr<HttpResponse> r =
        rest_->Delete(StrCat(loop_->base, "/", EscapePathSegment(it->first)));
    if (!r.ok() || (r->status != 200 && r->status != 404)) {
      *failure = RequestFailed(StrCat("cannot delete ", it->first), r, "delete");
      return Next::kList;
    }
    it = s.have.erase(it);
  }
  return Next::kWatch;
}

ReflectorHandler::Next SlicePublisher::AskAgain() {
  SliceContext& context = loop_->context;
  TaintProbe& probe = loop_->probe;
  if (!probe.answered && std::chrono::steady_clock::now() >= probe.due) {
    AskAboutTaints(context.api_version, &probe);
    if (Stopped()) return Next::kWatch;
    if (probe.kept) {
      // Unhealthy devices stay in the slices, tainted, from now on.
      context.device_taints = true;
      context.none_taint_effect = probe.none;
      if (TakeDesired()) return Next::kSyncAgain;
    }
  }
  if (context.node_uid.empty() && std::chrono::steady_clock::now() >= loop_->owner_due) {
    if (std::string why; ReadNodeUid(&context.node_uid, &why)) {
      // The same slices with their owner: replaced, same generation.
      LogInfo("ResourceSlices: read the Node's UID; the slices get their owner",
              {{"node", options_.node}});
      WantAt(Builder(/*take_change=*/false), loop_->s.generation);
      return Next::kSyncAgain;
    } else {
      const Ms wait = loop_->owner_backoff.Next();
      loop_->owner_due = std::chrono::steady_clock::now() + wait;
      LogWarning(
          "ResourceSlices: still cannot read the Node for its UID; the slices stay without an "
          "owner",
          {{"node", options_.node}, {"error", why}, {"retry_in", FormatDuration(wait)}});
    }
  }
  return Next::kWatch;
}

std::chrono::seconds SlicePublisher::WatchFor(std::chrono::seconds drawn) {
  // A watch is kept no longer than until a retry of the probe or of the
  // owner's read falls due.
  auto until = [&](std::chrono::steady_clock::time_point due) {
    drawn = std::min(
        drawn, std::chrono::ceil<std::chrono::seconds>(due - std::chrono::steady_clock::now()));
  };
  if (loop_->context.node_uid.empty()) until(loop_->owner_due);
  if (!loop_->probe.answered) until(loop_->probe.due);
  return drawn;
}

std::string SlicePublisher::WatchPath(const std::string& version, std::chrono::seconds timeout) {
  return StrCat(loop_->list_path,
                "&watch=1&allowWatchBookmarks=true&resourceVersion=", EscapePathSegment(version),
                "&timeoutSeconds=", timeout.count());
}

bool SlicePublisher::OnEvent(ObjectEvent event) {
  State& s = loop_->s;
  const rapidjson::Document object = ParseHeld(event.object);
  if (SpecString(object, "driver") != options_.driver ||
      SpecString(object, "nodeName") != options_.node) {
    return true;
  }
  const std::string name = StringAt(object, "metadata", "name");
  if (event.type == ObjectEvent::Type::kDeleted) {
    s.have.erase(name);
  } else {
    s.have[name] = std::move(event.object);
  }
  if (s.Matches(name)) return true;
  loop_->repair = true;  // Sync writes it back
  return false;
}

std::string SlicePublisher::Refused(int status, const std::string& head) {
  return Refusal(HttpResponse{status, head}, "watch", loop_->forbidden.Answered(status),
                 options_.forbidden_for_good);
}

}  // namespace gpu_agent::apiserver
