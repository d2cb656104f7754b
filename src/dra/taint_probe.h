// Whether the API server keeps devices' taints in ResourceSlices: a create
// with dryRun=All of a slice whose one device has a NoSchedule taint (and a
// None one, 1.36 and later) is answered as it would be stored; a server
// with the DRADeviceTaints gate off drops the field. A probe that gets no
// clear answer (no answer, 403, 429, 5xx) is asked again with a backoff of
// its own, up to the watch timeout (a probe that keeps failing costs one
// request a watch); a clear answer is not asked again.
#ifndef GPU_AGENT_DRA_TAINT_PROBE_H_
#define GPU_AGENT_DRA_TAINT_PROBE_H_

#include <chrono>
#include <string>

#include "apiserver/rest_client.h"
#include "base/backoff.h"
#include "dra/slice_refusal.h"

namespace gpu_agent::dra {

struct TaintProbeOptions {
  std::string driver;
  std::string node;
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds watch_timeout{std::chrono::minutes(10)};  // the backoff's cap
  // See SlicePublisherOptions::forbidden_for_good.
  std::chrono::milliseconds forbidden_for_good{30000};
};

class TaintProbe {
 public:
  // `rest` must outlive the probe.
  TaintProbe(TaintProbeOptions options, apiserver::RestClient* rest);

  // Asks the server through resource.k8s.io/`api_version`. False when no
  // clear answer came (a failure, logged, asked again at due()); true on
  // an answer, or when `rest` was cancelled.
  bool Ask(const std::string& api_version);
  // Not asked: taints are not used.
  void Skip();

  bool answered() const { return answered_; }  // a clear answer came
  bool kept() const { return kept_; }          // ... and it is that taints are kept
  bool none() const { return none_; }          // ... and the None effect
  std::chrono::steady_clock::time_point due() const { return due_; }

 private:
  const TaintProbeOptions options_;
  apiserver::RestClient* const rest_;
  bool answered_ = false;
  bool kept_ = false;
  bool none_ = false;
  // Asked with a None taint beside the NoSchedule one; a server that
  // refuses that (a 1.33 to 1.35 one with taints on) is asked again without.
  bool with_none_ = true;
  Backoff backoff_;
  std::chrono::steady_clock::time_point due_;
  std::string last_failure_;  // the kind of the last failure, logged once
  ForbiddenSpell forbidden_;  // the probe's 403s in a row
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_TAINT_PROBE_H_
