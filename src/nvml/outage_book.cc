#include "nvml/outage_book.h"

#include <algorithm>

#include "base/strings.h"

namespace gpu_agent::nvml {

std::string OutageBook::Describe(const Target& target) {
  const auto& [uuid, gi, ci] = target;
  if (gi < 0) return uuid;
  return ci < 0 ? StrCat(uuid, " GPU instance ", gi)
                : StrCat(uuid, " GPU instance ", gi, " compute instance ", ci);
}

bool OutageBook::Mark(const Target& target, const std::string& reason, int xid, bool needs_reset,
                      bool was_lost) {
  const Clock::TimePoint now = clock_->Now();
  const bool is_new = entries_.find(target) == entries_.end();
  Entry& e = entries_[target];
  e.next_probe = now + recovery_period_;
  if (needs_reset && !e.needs_reset) e.waiting_said = false;  // say why it now waits
  e.needs_reset = e.needs_reset || needs_reset;
  e.was_lost = e.was_lost || was_lost;
  if (is_new || needs_reset) {
    e.reason = reason;
    e.xid = xid;
  }
  return is_new;
}

std::chrono::milliseconds OutageBook::UntilNextProbe(std::chrono::milliseconds cap) const {
  std::chrono::milliseconds until = cap;
  for (const auto& [target, e] : entries_) {
    until = std::min(until, std::max(clock_->Until(e.next_probe), std::chrono::milliseconds(1)));
  }
  return until;
}

std::vector<Outage> OutageBook::Snapshot() const {
  std::vector<Outage> out;
  for (const auto& [t, e] : entries_) {
    out.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t), e.reason, e.xid, e.needs_reset,
                   e.was_lost});
  }
  return out;
}

}  // namespace gpu_agent::nvml
