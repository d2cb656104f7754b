// What the API server keeps of a ResourceSlice's newer fields: devices'
// taints (DRADeviceTaints) and a shared device's consumable capacity
// (DRAConsumableCapacity: allowMultipleAllocations, capacity request
// policies). A create with dryRun=All of a slice with a device of each kind
// asked about (one with a NoSchedule taint, and a None one, 1.36 and later;
// one shared) is answered as it would be stored; a server with a gate off
// drops the field. A probe that gets no clear answer (no answer, 403, 429,
// 5xx) is asked again with a backoff of its own, up to the watch timeout (a
// probe that keeps failing costs one request a watch); a clear answer is
// not asked again.
#ifndef GPU_AGENT_DRA_FEATURE_PROBE_H_
#define GPU_AGENT_DRA_FEATURE_PROBE_H_

#include <rapidjson/document.h>

#include <chrono>
#include <string>

#include "apiserver/rest_client.h"
#include "base/backoff.h"
#include "dra/slice_refusal.h"

namespace gpu_agent::dra {

struct FeatureProbeOptions {
  std::string driver;
  std::string node;
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds watch_timeout{std::chrono::minutes(10)};  // the backoff's cap
  // See SlicePublisherOptions::forbidden_for_good.
  std::chrono::milliseconds forbidden_for_good{30000};
  bool taints = true;    // asks whether devices' taints are kept
  bool sharing = false;  // asks whether a shared device's consumable capacity is
};

class FeatureProbe {
 public:
  // `rest` must outlive the probe.
  FeatureProbe(FeatureProbeOptions options, apiserver::RestClient* rest);

  // Asks the server through resource.k8s.io/`api_version`. False when no
  // clear answer came (a failure, logged, asked again at due()); true on
  // an answer, or when `rest` was cancelled.
  bool Ask(const std::string& api_version);
  // Not asked: neither is used.
  void Skip();

  bool answered() const { return answered_; }  // a clear answer came
  bool kept() const { return kept_; }          // ... and it is that taints are kept
  bool none() const { return none_; }          // ... and the None effect
  bool shared() const { return shared_; }      // ... and consumable capacity is kept
  std::chrono::steady_clock::time_point due() const { return due_; }

 private:
  const FeatureProbeOptions options_;
  apiserver::RestClient* const rest_;
  bool answered_ = false;
  bool kept_ = false;
  bool none_ = false;
  bool shared_ = false;
  // Asked with a None taint beside the NoSchedule one; a server that
  // refuses that (a 1.33 to 1.35 one with taints on) is asked again without.
  bool with_none_;
  // Asked with a shared device; a server that refuses the slice with one is
  // asked again without it (consumable capacity then cannot be used).
  bool with_shared_;
  // The server refused the probe as invalid (400, 422): asks again without
  // what it may have refused, or takes it as a clear answer.
  bool Refused(const apiserver::HttpResponse& r, const std::string& api_version);
  // A clear answer: `tainted` and `shared` are the probe's devices as the
  // server would store them (null where not asked).
  void Answered(const rapidjson::Value* tainted, const rapidjson::Value* shared);
  Backoff backoff_;
  std::chrono::steady_clock::time_point due_;
  std::string last_failure_;  // the kind of the last failure, logged once
  ForbiddenSpell forbidden_;  // the probe's 403s in a row
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_FEATURE_PROBE_H_
