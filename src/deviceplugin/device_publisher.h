// Holds one resource's device list and health, and tells subscribers (the
// ListAndWatch streams) when it changes. Readers take an immutable snapshot,
// so Allocate and GetPreferredAllocation never wait on a writer.
#ifndef GPU_AGENT_DEVICEPLUGIN_DEVICE_PUBLISHER_H_
#define GPU_AGENT_DEVICEPLUGIN_DEVICE_PUBLISHER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/device_key.h"
#include "deviceplugin/device.h"
#include "deviceplugin/health_ledger.h"

namespace gpu_agent::deviceplugin {

// One immutable version of the device list.
struct DeviceSnapshot {
  uint64_t version = 0;
  std::string resource_name;
  bool replicated = false;
  bool pack_replicas = false;
  std::vector<PluginDevice> devices;
  std::unordered_map<std::string, size_t> by_id;  // id -> index in devices
  // Replicas per shareable unit (1 without time-slicing).
  std::vector<int> replicas_per_physical;
  std::shared_ptr<const std::vector<std::vector<int>>> link_score;

  const PluginDevice* Find(const std::string& id) const {
    auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : &devices[it->second];
  }
  size_t HealthyCount() const;  // CountHealthy(devices)
};

class DevicePublisher {
 public:
  class Subscriber {
   public:
    virtual ~Subscriber() = default;
    // A newer snapshot exists. Called without the publisher's locks held.
    virtual void OnSnapshot() = 0;
    // The publisher is shutting down: finish the stream.
    virtual void OnClose() = 0;
  };

  explicit DevicePublisher(ResourceSpec spec);

  const std::string& resource_name() const { return resource_name_; }
  const std::string& endpoint() const { return endpoint_; }

  std::shared_ptr<const DeviceSnapshot> Current() const;

  // Records the health watcher's report that `key` (a GPU with all its MIG
  // devices and replicas, or one MIG instance) went out or came back.
  // Publishes and returns true when any device's health changed.
  bool SetHealth(const DeviceKey& key, bool healthy);
  // Physical GPUs (by UUID) whose devices are streamed unhealthy whatever
  // their health (DRA claims still hold them); publishes and returns true
  // when any device's health changed.
  bool SetWithheld(std::set<std::string> gpu_uuids);

  // Subscribers are held weakly: one that is gone is dropped.
  void Subscribe(std::weak_ptr<Subscriber> subscriber);
  // Asks every subscriber to finish its stream.
  void CloseAll();
  size_t SubscriberCount() const;

 private:
  void Notify(bool close);
  // REQUIRES: snapshot_mu_ held. A new snapshot with the ledger's and the
  // withheld set's health; false (none) when no device's health changed.
  bool RepublishLocked();

  const std::string resource_name_;
  const std::string endpoint_;

  mutable std::mutex snapshot_mu_;
  std::shared_ptr<const DeviceSnapshot> snapshot_;  // protected by snapshot_mu_
  health::HealthLedger ledger_;                     // protected by snapshot_mu_
  std::set<std::string> withheld_;                  // protected by snapshot_mu_

  mutable std::mutex subscribers_mu_;
  std::vector<std::weak_ptr<Subscriber>> subscribers_;  // protected by subscribers_mu_
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_DEVICE_PUBLISHER_H_
