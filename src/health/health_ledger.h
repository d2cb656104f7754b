// What the health watcher has reported out, and the health that makes of a
// device. The watcher (health/health_watcher.h) is the one source of device
// health; a ledger only records its reports, so every reader of health
// (each resource's publisher, static mode's count, DRA's slices, taints and
// health stream) holds one and feeds it the same reports.
#ifndef GPU_AGENT_HEALTH_HEALTH_LEDGER_H_
#define GPU_AGENT_HEALTH_HEALTH_LEDGER_H_

#include <map>
#include <string>
#include <vector>

#include "base/device_key.h"
#include "health/health_check_catalog.h"
#include "health/health_watcher.h"

namespace gpu_agent::health {

// The keys that are out, each with why, and each GPU's failing checks at
// severity degraded. A device is healthy when no key out covers it, so a
// GPU-wide recovery leaves an instance that is still out alone, and the
// other way round.
//
// Thread-compatible.
class HealthLedger {
 public:
  // A key out, as the ledger keeps it.
  struct Outage {
    DeviceKey key;
    std::string reason;  // "XID 79", "unhealthy at start", ...
    std::string cause;   // "lost", "xid" or a check's name (what dra.taints names)
    friend bool operator==(const Outage&, const Outage&) = default;
  };
  // A failing check -> what was judged, in the catalog's (CheckId) order.
  using Degraded = std::map<CheckId, std::string>;

  // The outage a report of a key going out, or a carried one, records.
  static Outage OutageOf(const HealthChange& change);
  static Outage OutageOf(const health::Outage& carried);

  // Records a report that `key` went out (`healthy` false) or came back; a
  // key already out keeps what it was out with. True when the set of keys
  // out changed.
  bool Set(const DeviceKey& key, bool healthy);
  // Records the watcher's report: its key goes out with the report's reason
  // and cause (a key out again takes the new ones and counts as the latest
  // out), or comes back. True when what is out changed.
  bool Set(const HealthChange& change);
  // Replaces every outage with `outages` (a generation's start: the GPUs
  // unhealthy at start and the outages carried over); of two for one key
  // the first is kept. The degraded checks stay.
  void SetOutages(std::vector<Outage> outages);

  // Records a check's new level: at severity degraded it is one of its
  // GPU's degraded checks, at any other level not. True when they changed.
  bool SetCheck(const CheckChange& change);

  // Whether no key out covers `device` (its GPU's, or its own).
  bool Healthy(const DeviceKey& device) const { return Covering(device) == nullptr; }
  // The first outage, in the order the keys went out, that covers `device`
  // (its GPU's, or its own); null when it is healthy.
  const Outage* Covering(const DeviceKey& device) const;
  // The failing checks at severity degraded of the GPU `uuid` (empty when
  // none). A check reads the whole GPU: its MIG devices share them.
  const Degraded& DegradedChecks(const std::string& uuid) const;

  // Every key out, in the order they went out.
  const std::vector<Outage>& outages() const { return out_; }

 private:
  std::vector<Outage> out_;                   // one per key
  std::map<std::string, Degraded> degraded_;  // by GPU UUID; none empty
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_LEDGER_H_
