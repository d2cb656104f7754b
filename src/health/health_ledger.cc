#include "health/health_ledger.h"

#include <algorithm>
#include <set>
#include <utility>

namespace gpu_agent::health {

namespace {

// The dra.taints cause of an outage. XID 79: the GPU has fallen off the
// bus, as GPU_IS_LOST says.
std::string CauseOf(bool lost, int xid, const std::string& check) {
  if (lost || xid == 79) return "lost";
  return check.empty() ? "xid" : check;
}

}  // namespace

HealthLedger::Outage HealthLedger::OutageOf(const HealthChange& change) {
  return {change.key, change.reason, CauseOf(change.lost, change.xid, change.check)};
}

HealthLedger::Outage HealthLedger::OutageOf(const health::Outage& carried) {
  return {carried.key, carried.reason, CauseOf(carried.was_lost, carried.xid, carried.check)};
}

bool HealthLedger::Set(const DeviceKey& key, bool healthy) {
  auto it = std::find_if(out_.begin(), out_.end(), [&](const Outage& o) { return o.key == key; });
  if (healthy == (it == out_.end())) return false;
  if (healthy) {
    out_.erase(it);
  } else {
    out_.push_back({key, "", ""});
  }
  return true;
}

bool HealthLedger::Set(const HealthChange& change) {
  auto it =
      std::find_if(out_.begin(), out_.end(), [&](const Outage& o) { return o.key == change.key; });
  if (change.healthy) {
    if (it == out_.end()) return false;
    out_.erase(it);
    return true;
  }
  Outage now = OutageOf(change);
  // Out again with the same reason and cause, and the latest out already.
  if (it != out_.end() && std::next(it) == out_.end() && *it == now) return false;
  if (it != out_.end()) out_.erase(it);
  out_.push_back(std::move(now));
  return true;
}

void HealthLedger::SetOutages(std::vector<Outage> outages) {
  out_.clear();
  std::set<DeviceKey> seen;
  for (Outage& o : outages) {
    if (seen.insert(o.key).second) out_.push_back(std::move(o));
  }
}

bool HealthLedger::SetCheck(const CheckChange& change) {
  const CheckStatus& now = change.now;
  if (now.level == Severity::kDegraded) {
    Degraded& checks = degraded_[now.uuid];
    auto [it, inserted] = checks.try_emplace(now.check, now.value);
    if (inserted) return true;
    if (it->second == now.value) return false;
    it->second = now.value;
    return true;
  }
  auto gpu = degraded_.find(now.uuid);
  if (gpu == degraded_.end() || gpu->second.erase(now.check) == 0) return false;
  if (gpu->second.empty()) degraded_.erase(gpu);
  return true;
}

const HealthLedger::Outage* HealthLedger::Covering(const DeviceKey& device) const {
  auto it = std::find_if(out_.begin(), out_.end(),
                         [&device](const Outage& o) { return o.key.Covers(device); });
  return it == out_.end() ? nullptr : &*it;
}

const HealthLedger::Degraded& HealthLedger::DegradedChecks(const std::string& uuid) const {
  static const Degraded* const kNone = new Degraded();
  auto it = degraded_.find(uuid);
  return it == degraded_.end() ? *kNone : it->second;
}

}  // namespace gpu_agent::health
