#include "health/outage_book.h"

#include <algorithm>

namespace gpu_agent::health {

bool OutageBook::Mark(const DeviceKey& key, const std::string& reason, int xid, bool needs_reset,
                      bool was_lost, const std::string& check) {
  const Clock::TimePoint now = clock_->Now();
  const bool is_new = entries_.find(key) == entries_.end();
  Entry& e = entries_[key];
  e.next_probe = now + recovery_period_;
  if (needs_reset && !e.needs_reset) e.waiting_said = false;  // say why it now waits
  e.needs_reset = e.needs_reset || needs_reset;
  e.was_lost = e.was_lost || was_lost;
  if (is_new || needs_reset) {
    e.reason = reason;
    e.xid = xid;
    e.check = check;
  }
  return is_new;
}

std::chrono::milliseconds OutageBook::UntilNextProbe(std::chrono::milliseconds cap) const {
  std::chrono::milliseconds until = cap;
  for (const auto& [key, e] : entries_) {
    until = std::min(until, std::max(clock_->Until(e.next_probe), std::chrono::milliseconds(1)));
  }
  return until;
}

std::vector<Outage> OutageBook::Snapshot() const {
  std::vector<Outage> out;
  for (const auto& [key, e] : entries_) {
    out.push_back({key, e.reason, e.xid, e.needs_reset, e.was_lost, e.check});
  }
  return out;
}

}  // namespace gpu_agent::health
