#include "agent/run/dra_health.h"

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
    in.consumable_capacity = c.consumable_capacity;
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

std::map<std::string, DraTaint> TaintsOf(const health::HealthLedger& ledger,
                                         const std::vector<dra::DraDevice>& devices,
                                         const std::string& driver, const DraEffectOf& effect_of) {
  std::map<std::string, DraTaint> out;
  auto effect = [&](std::string_view cause) {
    return effect_of ? effect_of(cause) : std::string("NoSchedule");
  };
  auto taint = [](std::string key, std::string value, const std::string& name) {
    DraTaint t;
    t.taint = {std::move(key), std::move(value),
               dra::ParseTaintEffect(name).value_or(dra::TaintEffect::kNoSchedule)};
    t.published = name != "off";
    return t;
  };
  for (const dra::DraDevice& d : devices) {
    if (const health::HealthLedger::Outage* outage = ledger.Covering(d.key)) {
      out[d.name] = taint(StrCat(driver, "/unhealthy"), dra::TaintValue(outage->reason),
                          effect(outage->cause));
      continue;
    }
    for (const auto& [id, judged] : ledger.DegradedChecks(d.key.uuid)) {
      const std::string check(health::Spec(id).name);
      const std::string e = effect(check);
      if (e == "off") continue;
      out[d.name] = taint(StrCat(driver, "/degraded"), dra::TaintValue(check), e);
      break;
    }
  }
  return out;
}

DraHealth::DraHealth(dra::ClaimPreparer* preparer, std::string driver)
    : preparer_(preparer), driver_(std::move(driver)) {}

void DraHealth::SetPublisher(dra::SlicePublisher* publisher) {
  std::lock_guard<std::mutex> lock(mu_);
  publisher_ = publisher;
  // What changed since the publisher was started with CurrentSlices (the
  // same slices again are no change to it).
  if (publisher_ != nullptr) {
    std::vector<dra::DraDevice> offered = OfferedLocked();
    std::map<std::string, DraTaint> taints = TaintsOf(ledger_, offered, driver_, effect_of_);
    publisher_->SetDesired(SlicesOf(std::move(offered), std::move(taints), driver_, pool_));
  }
}

dra::SliceBuilder DraHealth::CurrentSlices() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<dra::DraDevice> offered = OfferedLocked();
  std::map<std::string, DraTaint> taints = TaintsOf(ledger_, offered, driver_, effect_of_);
  return SlicesOf(std::move(offered), std::move(taints), driver_, pool_);
}

std::vector<dra::DraDevice> DraHealth::OfferedLocked() const {
  if (withheld_.empty()) return devices_;
  std::vector<dra::DraDevice> out;
  for (const dra::DraDevice& d : devices_) {
    if (withheld_.count(d.key.uuid) == 0) out.push_back(d);
  }
  return out;
}

void DraHealth::SetWithheld(std::map<std::string, std::string> holders) {
  std::lock_guard<std::mutex> lock(mu_);
  if (holders == withheld_) return;
  withheld_ = std::move(holders);
  preparer_->SetWithheld(withheld_);
  PublishLocked();
}

size_t DraHealth::withheld() const {
  std::lock_guard<std::mutex> lock(mu_);
  return withheld_.size();
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
  ledger_.SetOutages(std::move(outages));
  PublishLocked();
}

void DraHealth::Change(const health::HealthChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  ledger_.Set(change);
  PublishLocked();
}

void DraHealth::CheckChanged(const health::CheckChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  ledger_.SetCheck(change);
  PublishLocked();
}

size_t DraHealth::unhealthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unhealthy_;
}

void DraHealth::PublishLocked() {
  std::map<std::string, DraTaint> taints = TaintsOf(ledger_, devices_, driver_, effect_of_);
  std::vector<dra::DeviceHealthRecord> records;
  // Prepare refuses an unhealthy device whose taint is off as it would one
  // tainted NoSchedule: the scheduler has it out of the slices.
  std::map<std::string, dra::DeviceTaint> keep_away;
  size_t unhealthy = 0;
  for (const dra::DraDevice& d : devices_) {
    const health::HealthLedger::Outage* outage = ledger_.Covering(d.key);
    if (outage != nullptr) ++unhealthy;
    records.push_back({pool_, d.name, outage == nullptr, outage ? outage->reason : ""});
    auto t = taints.find(d.name);
    if (t == taints.end()) continue;
    dra::DeviceTaint& away = keep_away[d.name] = t->second.taint;
    if (!t->second.published && outage != nullptr) away.effect = dra::TaintEffect::kNoSchedule;
  }
  unhealthy_ = unhealthy;
  preparer_->SetTaints(std::move(keep_away));
  if (server_ != nullptr) server_->SetHealth(std::move(records));
  // A new generation (SetDevices) with other devices, a GPU withheld or
  // handed back, or a device's health changed, changes what is published;
  // the same again changes nothing.
  std::vector<dra::DraDevice> offered = OfferedLocked();
  if (publisher_ != nullptr && (offered != published_ || taints != published_taints_)) {
    publisher_->SetDesired(SlicesOf(offered, taints, driver_, pool_));
  }
  published_ = std::move(offered);
  published_taints_ = std::move(taints);
}

}  // namespace gpu_agent
