#include "health/health_poller.h"

#include "base/log.h"
#include "base/strings.h"
#include "nvml/gpu_handles.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::health {

HealthPoller::HealthPoller(const nvml::NvmlLibrary& lib, nvml::GpuHandles* handles,
                           std::vector<std::string> uuids, CheckSettings settings,
                           const Clock* clock, bool log_off)
    : lib_(lib),
      handles_(handles),
      uuids_(std::move(uuids)),
      settings_(settings),
      clock_(clock),
      log_off_(log_off) {}

HealthPoller::~HealthPoller() = default;

std::vector<GpuVerdict> HealthPoller::Poll() {
  std::vector<GpuVerdict> out;
  for (const std::string& uuid : uuids_) out.push_back(PollOne(uuid));
  return out;
}

GpuVerdict HealthPoller::PollOne(const std::string& uuid) {
  GpuVerdict v;
  v.uuid = uuid;
  nvmlReturn_t why = NVML_SUCCESS;
  nvmlDevice_t dev = handles_->Find(uuid, &why);
  if (dev == nullptr) {
    v.lost = why == NVML_ERROR_GPU_IS_LOST;
    v.no_handle = why;
    return v;
  }
  auto it = checks_.find(uuid);
  if (it == checks_.end()) {
    GpuFacts facts = ReadFacts(lib_, dev);
    discovery_calls_ += static_cast<uint64_t>(facts.nvml_calls);
    it = checks_.emplace(uuid, std::make_unique<GpuChecks>(lib_, std::move(facts))).first;
  }
  const GpuSample sample = ReadSample(lib_, dev, it->second->facts(), call_budget_,
                                      call_budget_ == SIZE_MAX ? nullptr : &link_cursor_[uuid]);
  poll_calls_ += static_cast<uint64_t>(sample.nvml_calls);
  if (sample.lost) {
    v.lost = true;
    return v;
  }
  v.results = it->second->Judge(sample, settings_, clock_->Now());
  for (const CheckResult& r : v.results) {
    if (r.state != CheckState::kOff || !log_off_) continue;
    if (!said_off_.insert({uuid, r.id}).second) continue;
    LogInfo("GPU health check off for this GPU",
            {{"uuid", uuid}, {"check", std::string(Spec(r.id).name)}, {"why", r.detail}});
  }
  return v;
}

}  // namespace gpu_agent::health
