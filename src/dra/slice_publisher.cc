#include "dra/slice_publisher.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "apiserver/discovery.h"
#include "apiserver/node_watch.h"
#include "apiserver/status.h"
#include "base/backoff.h"
#include "base/duration.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"
#include "dra/feature_probe.h"
#include "dra/slice_json.h"
#include "dra/slice_refusal.h"
#include "dra/slice_set.h"

namespace gpu_agent::dra {
namespace {

using Ms = std::chrono::milliseconds;
using apiserver::Connection;
using apiserver::CreateNodeWatchClients;
using apiserver::EscapePathSegment;
using apiserver::HttpResponse;
using apiserver::NodeWatchClients;
using apiserver::ObjectEvent;
using apiserver::Reflector;
using apiserver::ReflectorFailure;
using apiserver::ReflectorHandler;
using apiserver::ReflectorOptions;
using apiserver::RestClient;
using apiserver::RestOptions;
using json::Member;

}  // namespace

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
    ++posted_;
  }
  cv_.notify_all();
  // The watch in progress, or the next, ends: Sync publishes the change.
  reflector_->Interrupt();
}

bool SlicePublisher::WaitPublished(std::chrono::milliseconds within) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t want = posted_;
  return cv_.wait_for(lock, within, [&] { return stopped_ || published_ >= want; }) &&
         published_ >= want;
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

bool SlicePublisher::Discover(SliceContext* context, FeatureProbe* probe) {
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
  if (!options_.probe_device_taints && !options_.probe_sharing) {
    probe->Skip();
  } else if (!probe->Ask(context->api_version)) {
    ++stats_.errors;
  }
  TakeProbe(*probe, context);
  LogInfo("publishing ResourceSlices",
          {{"version", "resource.k8s.io/" + context->api_version}, {"node", options_.node}});
  return !Stopped();
}

void SlicePublisher::TakeProbe(const FeatureProbe& probe, SliceContext* context) {
  context->device_taints = probe.answered() && probe.kept();
  context->none_taint_effect = context->device_taints && probe.none();
  context->consumable_capacity = probe.answered() && probe.shared();
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
  json::Document d;
  if (absl::Status s = json::Parse(node->body, "the API server's Node", &d); !s.ok()) {
    *why = std::string(s.message());
    return false;
  }
  *uid = StringAt(d, "metadata", "uid");
  if (uid->empty()) *why = "the Node has no metadata.uid";
  return !uid->empty();
}

// What the watch thread holds between the reflector's calls.
struct SlicePublisher::Loop {
  Loop(const SlicePublisherOptions& o, apiserver::RestClient* rest)
      : probe(FeatureProbeOptions{o.driver, o.node, o.backoff_initial, o.watch_timeout,
                                  o.forbidden_for_good, o.probe_device_taints, o.probe_sharing},
              rest),
        repairs(o.backoff_initial, o.backoff_max, /*first=*/Ms(0)),
        owner_backoff(Backoff::Doubling(o.backoff_initial, o.watch_timeout)) {}
  SliceContext context;
  FeatureProbe probe;
  SliceSet s;
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
  loop_ = std::make_unique<Loop>(options_, rest_.get());
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
  if (take_change) {
    changed_ = false;
    taken_ = posted_;
  }
  return desired_;
}

void SlicePublisher::WantAt(const SliceBuilder& build, int64_t generation) {
  loop_->context.generation = generation;
  loop_->s.Want(build(loop_->context));
  stats_.generation = loop_->s.generation;
}

bool SlicePublisher::TakeDesired() {
  SliceSet& s = loop_->s;
  const SliceBuilder build = Builder(/*take_change=*/true);
  loop_->context.generation = s.generation;
  if (s.Wants(build(loop_->context))) return false;
  ++s.generation;
  WantAt(build, s.generation);
  return true;
}

std::optional<ReflectorFailure> SlicePublisher::List(std::string* version) {
  SliceSet& s = loop_->s;
  absl::StatusOr<HttpResponse> r = rest_->Get(loop_->list_path);
  if (!r.ok() || r->status != 200) return RequestFailed("cannot list them", r, "list");
  json::Document d;
  const absl::Status parsed = json::Parse(r->body, "the ResourceSlice list", &d);
  const rapidjson::Value* items = Member(d, "items");
  if (!parsed.ok() || items == nullptr || !items->IsArray()) {
    return ReflectorFailure{"cannot list them", parsed.ok() ? "the answer is not a list"
                                                            : std::string(parsed.message())};
  }
  s.have.clear();
  s.written.clear();
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    published_ = taken_;
  }
  cv_.notify_all();
  return AskAgain();
}

ReflectorHandler::Next SlicePublisher::Reconcile(std::optional<ReflectorFailure>* failure) {
  SliceSet& s = loop_->s;
  // Create and replace what differs.
  for (const auto& [name, json] : s.want) {
    if (s.Matches(name)) continue;
    auto have = s.have.find(name);
    absl::StatusOr<HttpResponse> r;
    if (have == s.have.end()) {
      r = rest_->Post(loop_->base, json);
      ++stats_.creates;
    } else {
      const std::unique_ptr<json::Document> body = ParseHeld(json);
      const std::string rv = StringAt(*ParseHeld(have->second), "metadata", "resourceVersion");
      (*body)["metadata"].AddMember("resourceVersion",
                                    rapidjson::Value(rv.c_str(), body->GetAllocator()),
                                    body->GetAllocator());
      r = rest_->Put(StrCat(loop_->base, "/", EscapePathSegment(name)), json::Serialize(*body));
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
    json::Document stored;
    if (!json::Parse(r->body, "the stored ResourceSlice", &stored).ok() || !stored.IsObject()) {
      s.have.erase(name);
      return Next::kList;
    }
    s.have[name] = json::Serialize(stored);
    s.Wrote(name, StringAt(stored, "metadata", "resourceVersion"));
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
  FeatureProbe& probe = loop_->probe;
  if (!probe.answered() && std::chrono::steady_clock::now() >= probe.due()) {
    if (!probe.Ask(context.api_version)) ++stats_.errors;
    if (Stopped()) return Next::kWatch;
    if (probe.kept() || probe.shared()) {
      // Unhealthy devices stay in the slices, tainted, from now on; shared
      // ones are published once.
      TakeProbe(probe, &context);
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
  if (!loop_->probe.answered()) until(loop_->probe.due());
  return drawn;
}

std::string SlicePublisher::WatchPath(const std::string& version, std::chrono::seconds timeout) {
  return StrCat(loop_->list_path,
                "&watch=1&allowWatchBookmarks=true&resourceVersion=", EscapePathSegment(version),
                "&timeoutSeconds=", timeout.count());
}

bool SlicePublisher::OnEvent(ObjectEvent event) {
  SliceSet& s = loop_->s;
  const std::unique_ptr<json::Document> held = ParseHeld(event.object);
  const rapidjson::Document& object = *held;
  if (SpecString(object, "driver") != options_.driver ||
      SpecString(object, "nodeName") != options_.node) {
    return true;
  }
  const std::string name = StringAt(object, "metadata", "name");
  // The watch catching up with a write of this publisher's that a newer
  // one has overtaken (its desired slices changed meanwhile): what it has
  // is newer already.
  if (event.type != ObjectEvent::Type::kDeleted &&
      s.StaleEcho(name, StringAt(object, "metadata", "resourceVersion"))) {
    return true;
  }
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

}  // namespace gpu_agent::dra
