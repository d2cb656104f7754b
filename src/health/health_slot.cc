#include "health/health_slot.h"

namespace gpu_agent::health {

HealthWatcher* HealthSlot::StopRunning() {
  HealthWatcher* running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running = watcher_.get();
  }
  // Outside mu_: scrapes and probes read on while it stops.
  // Safe: the watcher is replaced only under replace_mu_, which the caller
  // holds.
  if (running) running->Stop();
  return running;
}

std::vector<HealthWatcher::Outage> HealthSlot::StopForReplacement() {
  std::lock_guard<std::mutex> replacing(replace_mu_);
  HealthWatcher* stopped = StopRunning();
  // Stopped, the watcher's thread marks nothing more: no outage after this
  // read goes missing.
  return stopped ? stopped->Outages() : std::vector<HealthWatcher::Outage>{};
}

void HealthSlot::Replace(std::unique_ptr<HealthWatcher> next) {
  std::lock_guard<std::mutex> replacing(replace_mu_);
  StopRunning();
  std::lock_guard<std::mutex> lock(mu_);
  if (watcher_) {
    for (const auto& [xid, n] : watcher_->XidCounts()) replaced_xids_[xid] += n;
    replaced_polls_ += watcher_->Polls();
    replaced_poll_calls_ += watcher_->PollCalls();
  }
  watcher_ = std::move(next);
}

void HealthSlot::Stop() {
  std::lock_guard<std::mutex> replacing(replace_mu_);
  StopRunning();
}

void HealthSlot::OperatorVouches() {
  std::lock_guard<std::mutex> lock(mu_);
  if (watcher_) watcher_->OperatorVouches();
}

bool HealthSlot::Alive(std::string* why) const {
  std::lock_guard<std::mutex> lock(mu_);
  return !watcher_ || watcher_->Alive(why);
}

std::map<int, uint64_t> HealthSlot::XidCounts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, uint64_t> out = replaced_xids_;
  if (watcher_) {
    for (const auto& [xid, n] : watcher_->XidCounts()) out[xid] += n;
  }
  return out;
}

std::vector<CheckStatus> HealthSlot::Checks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watcher_ ? watcher_->Checks() : std::vector<CheckStatus>{};
}

std::vector<HealthWatcher::Outage> HealthSlot::Outages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watcher_ ? watcher_->Outages() : std::vector<HealthWatcher::Outage>{};
}

uint64_t HealthSlot::Polls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replaced_polls_ + (watcher_ ? watcher_->Polls() : 0);
}

uint64_t HealthSlot::PollCalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replaced_poll_calls_ + (watcher_ ? watcher_->PollCalls() : 0);
}

}  // namespace gpu_agent::health
