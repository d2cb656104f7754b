// Judges one GPU's polled health checks from its samples: each check's
// state, its value as text, and NVML's raw answers behind it. Counters are
// judged as deltas or rates since the previous sample, never as lifetime
// totals; the first sample of a counter only sets its baseline.
//
// Thread-compatible: one poller thread owns it.
#ifndef GPU_AGENT_HEALTH_GPU_CHECKS_H_
#define GPU_AGENT_HEALTH_GPU_CHECKS_H_

#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "health/gpu_sample.h"
#include "health/health_check_catalog.h"

namespace gpu_agent::health {

enum class CheckState {
  kPass,      // judged, fine
  kFailing,   // judged, not fine: the check's severity applies
  kOff,       // not on this GPU: NVML does not support it, or nothing to judge (no NVLink, ECC off)
  kUnknown,   // NVML did not answer this time (an error other than NOT_SUPPORTED)
  kBaseline,  // a counter's first reading; judged from the next poll on
};
std::string_view CheckStateName(CheckState s);

struct CheckResult {
  CheckId id;
  CheckState state = CheckState::kUnknown;
  std::string value;   // what was judged, in words ("83 C", "2 of 18 links down")
  std::string detail;  // why off or unknown, or what a threshold was
  // The judged quantity as a number, for metrics: degrees, links down, new
  // errors, replays a minute, lanes, generation, recovery action, 0/1 for
  // a pending repair. NaN when there is none (off, unknown, a baseline).
  double number = std::numeric_limits<double>::quiet_NaN();
  // NVML's answers behind the check: query -> value, or NVML's error text
  // ("Not Supported (3)").
  std::vector<std::pair<std::string, std::string>> raw;
};

class GpuChecks {
 public:
  // REQUIRES: `lib` outlives this object (it is used for error texts only).
  GpuChecks(const nvml::NvmlLibrary& lib, GpuFacts facts) : lib_(lib), facts_(std::move(facts)) {}

  // Every check's result for `sample`, read at `now`, in CheckId order.
  std::vector<CheckResult> Judge(const GpuSample& sample, const CheckSettings& settings,
                                 Clock::TimePoint now);

  const GpuFacts& facts() const { return facts_; }

 private:
  struct Counter {
    unsigned long long value = 0;
    Clock::TimePoint at;
  };

  const nvml::NvmlLibrary& lib_;
  const GpuFacts facts_;
  std::optional<Counter> ecc_, replays_;
  // Each watched link's last answer: a poll that reads only some links (one
  // call a link, within the poll's budget) judges the rest as last read.
  std::map<unsigned, Answered<bool>> links_;
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_GPU_CHECKS_H_
