// Keeps one node's ResourceSlices of one DRA driver equal to what the agent
// publishes, as static mode keeps the Node's capacity: LIST the slices
// (fieldSelector spec.nodeName and spec.driver), create, replace or delete
// what differs, then WATCH from the list's version and repair what an event
// shows changed (the kubelet deletes a node's slices at its start and after
// a driver has been gone a while; anyone may edit or delete them). A 410
// lists again (at once, the first in a row); any other failed request is
// logged with the server's answer and everything is listed again after a
// backoff with jitter, or the server's Retry-After when that is longer;
// watch timeouts are drawn at random, so a fleet does not stay in step. In
// steady state nothing is sent but the watch's renewals. The slices name the
// Node as their owner; a Node the start could not read is read again before
// a watch, with a backoff, and the slices get their owner (same generation)
// once it answers.
//
// Slices are compared on what the agent sets: a field the server adds does
// not count as a difference. The pool's generation goes up by one for each
// change of the desired slices; a restart that finds the slices already as
// wanted keeps their generation, and one that finds them otherwise
// publishes the next.
#ifndef GPU_AGENT_DRA_SLICE_PUBLISHER_H_
#define GPU_AGENT_DRA_SLICE_PUBLISHER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"
#include "apiserver/reflector.h"
#include "apiserver/rest_client.h"

namespace gpu_agent::dra {

class FeatureProbe;

struct SlicePublisherOptions {
  // Of resource.k8s.io; empty: the first of v1, v1beta2, v1beta1 the server
  // serves, asked before the first LIST.
  std::string api_version;
  std::string driver;
  std::string node;
  // Each watch asks the server to end it after a time drawn from
  // [watch_timeout, 2*watch_timeout), whole seconds, at least 1 s.
  std::chrono::milliseconds watch_timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
  // A 403 is logged as the authorizer's refusal, which a server that has
  // just started answers until its RBAC rules are loaded (seconds); once
  // every request has been refused this long, as the role's missing
  // permission.
  std::chrono::milliseconds forbidden_for_good{30000};
  // Asks the server, at the start, whether it keeps devices' taints (a
  // create with dryRun=All of a slice whose device has one: a server with
  // the DRADeviceTaints gate off drops the field); the answer is
  // SliceContext::device_taints. A probe that gets no clear answer (no
  // answer, 403, 429, 5xx) is asked again with a backoff of its own, up to
  // the watch timeout, until one comes; meanwhile device_taints is false.
  // A clear answer is not asked again.
  bool probe_device_taints = false;
  // The same for consumable capacity (a shared device's fields, dropped by
  // a server with the DRAConsumableCapacity gate off), asked in the same
  // request: SliceContext::consumable_capacity.
  bool probe_sharing = false;
};

// What the slices are built for.
struct SliceContext {
  std::string api_version;  // of resource.k8s.io: v1, v1beta2 or v1beta1
  std::string node_uid;     // the Node's UID for the owner reference; empty: unknown
  int64_t generation = 1;   // the pool's
  // The server keeps devices' taints: an unhealthy device may stay in the
  // slices with a NoSchedule taint rather than leave them.
  bool device_taints = false;
  // ... and takes the None effect (informational, 1.36 and later).
  bool none_taint_effect = false;
  // The server keeps a shared device's consumable capacity: a time-sliced
  // device may be published once, for all the claims that share it.
  bool consumable_capacity = false;
};

// The desired slices: JSON objects of `api_version`, each with its
// metadata.name and spec.pool.generation = `generation`.
using SliceBuilder = std::function<std::vector<std::string>(const SliceContext&)>;

// The reflector's counters (lists, watches, watch_expired: 410 Gone,
// watch_failures) and the publisher's.
struct SlicePublisherStats : apiserver::ReflectorStats {
  std::atomic<uint64_t> creates{0};
  std::atomic<uint64_t> updates{0};
  std::atomic<uint64_t> deletes{0};
  std::atomic<uint64_t> repairs{0};  // reconciles a watch event asked for
  std::atomic<uint64_t> errors{0};   // failed requests, retried after a backoff
  std::atomic<int64_t> generation{0};
  std::atomic<bool> in_sync{false};  // the slices are as wanted (last seen)
};

class SlicePublisher : private apiserver::ReflectorHandler {
 public:
  static absl::StatusOr<std::unique_ptr<SlicePublisher>> Start(
      const apiserver::Connection& connection, const apiserver::RestOptions& rest,
      SlicePublisherOptions options, SliceBuilder desired);
  ~SlicePublisher() override;
  // Ends the watch and the thread. The slices stay: the kubelet removes
  // them when the driver has been gone a while.
  void Stop();
  // The desired slices changed: published under the next generation, when
  // what `desired` builds differs from the slices wanted before (the same
  // slices again are no change).
  void SetDesired(SliceBuilder desired);
  // Waits up to `within` until the slices are as the last SetDesired asked
  // (seen so after its writes); false when they are not by then.
  bool WaitPublished(std::chrono::milliseconds within);
  const SlicePublisherStats& stats() const { return stats_; }

 private:
  SlicePublisher(SlicePublisherOptions options, std::unique_ptr<apiserver::RestClient> rest,
                 std::unique_ptr<apiserver::RestClient> watch);
  static apiserver::ReflectorOptions ReflectorOptionsFor(const SlicePublisherOptions& o);
  void Run();
  // The served version of resource.k8s.io and the Node's UID, asked until
  // the version is known, and whether taints are kept (asked once here);
  // false when stopped first.
  bool Discover(SliceContext* context, FeatureProbe* probe);
  // What the probe's answer allows the slices.
  static void TakeProbe(const FeatureProbe& probe, SliceContext* context);
  // GETs the Node: its UID, or false with `why`.
  bool ReadNodeUid(std::string* uid, std::string* why);
  // Waits `d` unless stopped or given new slices; false when stopped.
  bool Pause(std::chrono::milliseconds d);
  bool Stopped();

  // The reflector's calls, on the thread (reflector.h).
  std::optional<apiserver::ReflectorFailure> List(std::string* version) override;
  Next Sync(std::optional<apiserver::ReflectorFailure>* failure) override;
  std::string WatchPath(const std::string& version, std::chrono::seconds timeout) override;
  std::chrono::seconds WatchFor(std::chrono::seconds drawn) override;
  bool OnEvent(apiserver::ObjectEvent event) override;
  std::string Refused(int status, const std::string& head) override;
  void OnFailure() override;
  // Sync's parts: create, replace and delete what differs; then the probe
  // and the owner's read when due.
  Next Reconcile(std::optional<apiserver::ReflectorFailure>* failure);
  Next AskAgain();
  // A request refused or unanswered, as a failure.
  apiserver::ReflectorFailure RequestFailed(const std::string& what,
                                            const absl::StatusOr<apiserver::HttpResponse>& r,
                                            const char* verb);
  // The builder as it is now; `take_change`: a change posted meanwhile is
  // in what it builds, so it is taken.
  SliceBuilder Builder(bool take_change);
  // The desired slices: what `build` makes at `generation`.
  void WantAt(const SliceBuilder& build, int64_t generation);
  // A change posted (or a context changed): the builder's slices under the
  // next generation where they differ from those wanted. Input that makes
  // the same slices publishes nothing. Whether they differ.
  bool TakeDesired();

  struct Loop;

  const SlicePublisherOptions options_;
  const std::unique_ptr<apiserver::RestClient> rest_;
  const std::unique_ptr<apiserver::RestClient> watch_;
  SlicePublisherStats stats_;
  const std::unique_ptr<apiserver::Reflector> reflector_;
  std::unique_ptr<Loop> loop_;  // the thread's
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;    // protected by mu_
  bool changed_ = false;    // protected by mu_: SetDesired since the last reconcile
  SliceBuilder desired_;    // protected by mu_
  uint64_t posted_ = 0;     // protected by mu_: SetDesired calls
  uint64_t taken_ = 0;      // protected by mu_: of those, the last one taken
  uint64_t published_ = 0;  // protected by mu_: of those, the last one published
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_SLICE_PUBLISHER_H_
