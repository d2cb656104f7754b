#include "agent/run/dra_health.h"

#include <algorithm>

#include "base/strings.h"
#include "dra/resource_slice.h"
#include "health/health_check_catalog.h"

namespace gpu_agent {

dra::SliceBuilder SlicesOf(std::vector<dra::DraDevice> devices,
                           std::map<std::string, DraTaint> taints, std::string driver,
                           std::string node) {
  return [devices = std::move(devices), taints = std::move(taints), driver = std::move(driver),
          node = std::move(node)](const dra::SliceContext& c) {
    dra::SliceInput in;
    in.api_version = c.api_version;
    in.driver = driver;
    in.node = node;
    in.node_uid = c.node_uid;
    in.pool_generation = c.generation;
    for (const dra::DraDevice& d : devices) {
      auto t = taints.find(d.name);
      if (t == taints.end()) {
        in.devices.push_back(d);
        continue;
      }
      const bool none = t->second.taint.effect == dra::TaintEffect::kNone;
      if (t->second.published && c.device_taints && (!none || c.none_taint_effect)) {
        in.devices.push_back(d);
        in.tainted[d.name] = t->second.taint;
      } else if (none) {
        in.devices.push_back(d);  // informational: no taint to show it with here
      }
      // Otherwise its taint keeps claims away and cannot be published: it
      // leaves the slices until it is back.
    }
    return dra::BuildResourceSlices(in);
  };
}

DraHealth::DraHealth(dra::ClaimPreparer* preparer, std::string driver)
    : preparer_(preparer), driver_(std::move(driver)) {}

namespace {

// The dra.taints cause of an outage. XID 79: the GPU has fallen off the
// bus, as GPU_IS_LOST says.
std::string CauseOf(bool lost, int xid, const std::string& check) {
  if (lost || xid == 79) return "lost";
  return check.empty() ? "xid" : check;
}

}  // namespace

DraHealth::Outage DraHealth::OutageOf(const health::HealthChange& change) {
  return {change.key, change.reason, CauseOf(change.lost, change.xid, change.check)};
}

DraHealth::Outage DraHealth::OutageOf(const health::Outage& carried) {
  return {carried.key, carried.reason, CauseOf(carried.was_lost, carried.xid, carried.check)};
}

void DraHealth::SetPublisher(dra::SlicePublisher* publisher) {
  std::lock_guard<std::mutex> lock(mu_);
  publisher_ = publisher;
  // What changed since the publisher was started with CurrentSlices (the
  // same slices again are no change to it).
  if (publisher_ != nullptr) {
    publisher_->SetDesired(SlicesOf(devices_, TaintsLocked(), driver_, pool_));
  }
}

dra::SliceBuilder DraHealth::CurrentSlices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return SlicesOf(devices_, TaintsLocked(), driver_, pool_);
}

void DraHealth::SetServer(dra::DraServer* server) {
  std::lock_guard<std::mutex> lock(mu_);
  server_ = server;
  PublishLocked();
}

void DraHealth::SetDevices(std::vector<dra::DraDevice> devices, const std::string& pool,
                           EffectOf effect_of, std::vector<Outage> outages) {
  std::lock_guard<std::mutex> lock(mu_);
  devices_ = std::move(devices);
  pool_ = pool;
  effect_of_ = std::move(effect_of);
  outages_ = std::move(outages);
  PublishLocked();
}

void DraHealth::Change(const health::HealthChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(outages_, [&](const Outage& o) { return o.key == change.key; });
  if (!change.healthy) outages_.push_back(OutageOf(change));
  PublishLocked();
}

void DraHealth::CheckChanged(const health::CheckChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string check(health::Spec(change.now.check).name);
  if (change.now.level == health::Severity::kDegraded) {
    degraded_[change.now.uuid][check] = change.now.value;
  } else if (auto it = degraded_.find(change.now.uuid); it != degraded_.end()) {
    it->second.erase(check);
    if (it->second.empty()) degraded_.erase(it);
  }
  PublishLocked();
}

size_t DraHealth::unhealthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unhealthy_;
}

void DraHealth::PublishLocked() {
  std::vector<dra::DeviceHealthRecord> records;
  std::map<std::string, DraTaint> taints = TaintsLocked();
  std::map<std::string, std::string> reasons = ReasonsLocked();
  // Prepare refuses an unhealthy device whose taint is off as it would one
  // tainted NoSchedule: the scheduler has it out of the slices.
  std::map<std::string, dra::DeviceTaint> keep_away;
  for (const auto& [name, t] : taints) {
    keep_away[name] = t.taint;
    if (!t.published && reasons.count(name) > 0) {
      keep_away[name].effect = dra::TaintEffect::kNoSchedule;
    }
  }
  size_t unhealthy = 0;
  for (const dra::DraDevice& d : devices_) {
    auto reason = reasons.find(d.name);
    const bool healthy = reason == reasons.end();
    if (!healthy) ++unhealthy;
    records.push_back({pool_, d.name, healthy, healthy ? "" : reason->second});
  }
  unhealthy_ = unhealthy;
  preparer_->SetTaints(std::move(keep_away));
  if (server_ != nullptr) server_->SetHealth(std::move(records));
  // A new generation (SetDevices) with other devices, or a device's
  // health changed, changes what is published; the same again changes
  // nothing.
  if (publisher_ != nullptr && (devices_ != published_ || taints != published_taints_)) {
    publisher_->SetDesired(SlicesOf(devices_, taints, driver_, pool_));
  }
  published_ = devices_;
  published_taints_ = std::move(taints);
}

const DraHealth::Outage* DraHealth::OutageOfLocked(const dra::DraDevice& d) const {
  for (const Outage& o : outages_) {
    if (o.key.Covers(d.key)) return &o;
  }
  return nullptr;
}

std::map<std::string, std::string> DraHealth::ReasonsLocked() const {
  std::map<std::string, std::string> out;
  for (const dra::DraDevice& d : devices_) {
    if (const Outage* o = OutageOfLocked(d)) out.emplace(d.name, o->reason);
  }
  return out;
}

std::map<std::string, DraTaint> DraHealth::TaintsLocked() const {
  std::map<std::string, DraTaint> out;
  auto effect = [&](const std::string& cause) {
    return effect_of_ ? effect_of_(cause) : std::string("NoSchedule");
  };
  auto taint = [](std::string key, std::string value, const std::string& name) {
    DraTaint t;
    t.taint = {std::move(key), std::move(value),
               dra::ParseTaintEffect(name).value_or(dra::TaintEffect::kNoSchedule)};
    t.published = name != "off";
    return t;
  };
  for (const dra::DraDevice& d : devices_) {
    if (const Outage* outage = OutageOfLocked(d)) {
      out[d.name] = taint(StrCat(driver_, "/unhealthy"), dra::TaintValue(outage->reason),
                          effect(outage->cause));
      continue;
    }
    // A degraded check reads the whole GPU: its MIG devices share it.
    auto degraded = degraded_.find(d.key.uuid);
    if (degraded == degraded_.end()) continue;
    for (const health::CheckSpec& spec : health::CheckSpecs()) {
      const std::string check(spec.name);
      if (degraded->second.count(check) == 0 || effect(check) == "off") continue;
      out[d.name] = taint(StrCat(driver_, "/degraded"), dra::TaintValue(check), effect(check));
      break;
    }
  }
  return out;
}

}  // namespace gpu_agent
