// Polls the health checks of a set of GPUs (health_check_catalog.h): each
// GPU's facts asked once, when it is first seen answering, then one sample
// a poll, judged by its GpuChecks. A check NVML does not support on a GPU
// is off for that GPU, said once in the log, never the GPU. MIG devices are
// not polled apart: the checks read the physical GPU, which MIG devices
// share, so a parent and its children are judged once.
//
// Thread-compatible: one thread (the health watcher's, or a one-shot
// command's) owns it.
#ifndef GPU_AGENT_HEALTH_HEALTH_POLLER_H_
#define GPU_AGENT_HEALTH_HEALTH_POLLER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "health/gpu_checks.h"
#include "health/health_check_catalog.h"

namespace gpu_agent::nvml {

class GpuHandles;
class NvmlLibrary;

}  // namespace gpu_agent::nvml

namespace gpu_agent::health {

struct GpuVerdict {
  std::string uuid;
  bool lost = false;         // NVML answered GPU_IS_LOST
  nvmlReturn_t no_handle{};  // why the GPU has no handle (results then empty)
  std::vector<CheckResult> results;
};

class HealthPoller {
 public:
  // REQUIRES: `lib`, `handles` and `clock` outlive the poller. `log_off`:
  // log once each check that is off for a GPU (a one-shot report shows it
  // instead).
  HealthPoller(const nvml::NvmlLibrary& lib, nvml::GpuHandles* handles,
               std::vector<std::string> uuids, CheckSettings settings, const Clock* clock,
               bool log_off = true);

  // Where a GPU's NVLink state is read one call a link (drivers without the
  // field value: GPUs before Hopper), only as many links a poll as keep it
  // within this many NVML calls a GPU (one link at least), in turn. A
  // one-shot report sets SIZE_MAX: every link.
  void set_call_budget(size_t n) { call_budget_ = n; }
  static constexpr size_t kCallBudget = 10;
  ~HealthPoller();

  // One poll of every GPU, in the order given.
  std::vector<GpuVerdict> Poll();
  // One poll of `uuid` alone (one of the GPUs given).
  GpuVerdict PollOne(const std::string& uuid);

  const CheckSettings& settings() const { return settings_; }
  // NVML calls made by polls (not by discovery), and polls made.
  uint64_t poll_calls() const { return poll_calls_; }
  uint64_t discovery_calls() const { return discovery_calls_; }

 private:
  const nvml::NvmlLibrary& lib_;
  nvml::GpuHandles* const handles_;
  const std::vector<std::string> uuids_;
  const CheckSettings settings_;
  const Clock* const clock_;
  const bool log_off_;
  std::map<std::string, std::unique_ptr<GpuChecks>> checks_;  // by UUID, once discovered
  std::set<std::pair<std::string, CheckId>> said_off_;
  std::map<std::string, size_t> link_cursor_;  // by UUID
  size_t call_budget_ = kCallBudget;
  uint64_t poll_calls_ = 0, discovery_calls_ = 0;
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_POLLER_H_
