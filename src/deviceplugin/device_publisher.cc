#include "deviceplugin/device_publisher.h"

#include <algorithm>

namespace gpu_agent::deviceplugin {

size_t DeviceSnapshot::HealthyCount() const { return CountHealthy(devices); }

DevicePublisher::DevicePublisher(ResourceSpec spec)
    : resource_name_(spec.resource_name), endpoint_(spec.endpoint) {
  auto snap = std::make_shared<DeviceSnapshot>();
  snap->version = 1;
  snap->resource_name = spec.resource_name;
  snap->replicated = spec.replicated;
  snap->pack_replicas = spec.pack_replicas;
  snap->devices = std::move(spec.devices);
  // A device unhealthy from the start (on a GPU lost at discovery) is shown
  // so; the ledger learns of it from the health watcher, the one source of
  // device health, which reports it before anything is served.
  int max_physical = -1;
  for (size_t i = 0; i < snap->devices.size(); ++i) {
    snap->by_id.emplace(snap->devices[i].id, i);
    max_physical = std::max(max_physical, snap->devices[i].physical);
  }
  snap->replicas_per_physical.assign(static_cast<size_t>(max_physical + 1), 0);
  for (const PluginDevice& d : snap->devices) {
    ++snap->replicas_per_physical[static_cast<size_t>(d.physical)];
  }
  snap->link_score =
      std::make_shared<const std::vector<std::vector<int>>>(std::move(spec.link_score));
  snapshot_ = std::move(snap);
}

std::shared_ptr<const DeviceSnapshot> DevicePublisher::Current() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

bool DevicePublisher::SetHealth(const DeviceKey& key, bool healthy) {
  {
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    if (!ledger_.Set(key, healthy) || !RepublishLocked()) return false;
  }
  Notify(false);
  return true;
}

bool DevicePublisher::SetWithheld(std::set<std::string> gpu_uuids) {
  {
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    if (gpu_uuids == withheld_) return false;
    withheld_ = std::move(gpu_uuids);
    if (!RepublishLocked()) return false;
  }
  Notify(false);
  return true;
}

bool DevicePublisher::RepublishLocked() {
  auto next = std::make_shared<DeviceSnapshot>(*snapshot_);
  if (!ApplyHealth(ledger_, &next->devices, withheld_)) return false;
  ++next->version;
  snapshot_ = std::move(next);
  return true;
}

void DevicePublisher::Subscribe(std::weak_ptr<Subscriber> subscriber) {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                    [](const auto& w) { return w.expired(); }),
                     subscribers_.end());
  subscribers_.push_back(std::move(subscriber));
}

void DevicePublisher::CloseAll() { Notify(true); }

size_t DevicePublisher::SubscriberCount() const {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  return static_cast<size_t>(std::count_if(subscribers_.begin(), subscribers_.end(),
                                           [](const auto& w) { return !w.expired(); }));
}

void DevicePublisher::Notify(bool close) {
  // Lock the live subscribers, then call them with no lock held: a stream
  // may finish (and drop its last reference) from inside the call.
  std::vector<std::shared_ptr<Subscriber>> live;
  {
    std::lock_guard<std::mutex> lock(subscribers_mu_);
    for (const auto& w : subscribers_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (const auto& s : live) {
    if (close) {
      s->OnClose();
    } else {
      s->OnSnapshot();
    }
  }
}

}  // namespace gpu_agent::deviceplugin
