// The health of DRA mode's devices as the kubelet, the scheduler and
// prepare see it: a projection of the health ledger (health/health_ledger.h:
// the watcher's outages and failing checks at severity degraded) onto the
// devices each covers, each made a taint whose effect dra.taints gives its
// cause (agent/config/dra_taints.h).
// The health stream hears which devices are unhealthy, prepare which taints
// keep claims away, and the slice publisher what to publish: where the API
// server keeps taints a device stays in the slices with its taint (a None
// taint only where the server serves that effect); otherwise a device whose
// taint keeps claims away leaves the slices. The watcher's thread reports;
// prepare, the slices and the health stream read. DraHealth keeps no record
// of its own: it holds the ledger the watcher's reports feed and projects it.
// The projections (TaintsOf, SlicesOf) are pure; they live here, in the room
// that sees both dra (devices, taints) and health (the ledger), so that
// neither of those two rooms needs the other.
#ifndef GPU_AGENT_AGENT_RUN_DRA_HEALTH_H_
#define GPU_AGENT_AGENT_RUN_DRA_HEALTH_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/device_key.h"
#include "dra/claim_preparer.h"
#include "dra/device_taint.h"
#include "dra/dra_device.h"
#include "dra/dra_server.h"
#include "dra/slice_publisher.h"
#include "health/health_ledger.h"
#include "health/health_watcher.h"

namespace gpu_agent {

// A device's taint, and whether it is published ("off" in dra.taints: not,
// and an unhealthy device then leaves the slices).
struct DraTaint {
  dra::DeviceTaint taint;
  bool published = true;
  friend bool operator==(const DraTaint&, const DraTaint&) = default;
};

// The slices of `devices` with their taints (by device name), for whatever
// version, generation and taint support the publisher finds.
dra::SliceBuilder SlicesOf(std::vector<dra::DraDevice> devices,
                           std::map<std::string, DraTaint> taints, std::string driver,
                           std::string node);

// The effect dra.taints gives a cause ("lost", "xid", a check's name):
// "None", "NoSchedule", "NoExecute" or "off".
using DraEffectOf = std::function<std::string(std::string_view cause)>;

// Each device's taint, by name, as `ledger` has its health: the first
// outage's that covers it, else its GPU's first degraded check's whose effect
// is not off. Without `effect_of`, every cause is NoSchedule.
std::map<std::string, DraTaint> TaintsOf(const health::HealthLedger& ledger,
                                         const std::vector<dra::DraDevice>& devices,
                                         const std::string& driver, const DraEffectOf& effect_of);

class DraHealth {
 public:
  using EffectOf = DraEffectOf;
  using Outage = health::HealthLedger::Outage;

  DraHealth(dra::ClaimPreparer* preparer, std::string driver);

  // The publisher is handed each change of what is published; null: none.
  void SetPublisher(dra::SlicePublisher* publisher);
  // The slices of the devices and their health now.
  dra::SliceBuilder CurrentSlices() const;
  void SetServer(dra::DraServer* server);
  // A generation's devices, pool, effects and the outages it starts with
  // (degraded checks are carried over).
  void SetDevices(std::vector<dra::DraDevice> devices, const std::string& pool, EffectOf effect_of,
                  std::vector<Outage> outages);
  // Physical GPUs (by UUID) that something else holds, each with who (a
  // node moving from the device plugin: "device-plugin pods ml/a"): their
  // devices leave the slices and prepare refuses them, naming the holder,
  // until they are handed back (an empty map).
  void SetWithheld(std::map<std::string, std::string> holders);
  size_t withheld() const;
  // The health watcher's reports.
  void Change(const health::HealthChange& change);
  void CheckChanged(const health::CheckChange& change);
  size_t unhealthy() const;

 private:
  // Projects the ledger onto the devices: prepare's taints, the health
  // stream's records and, when they changed, the slices.
  void PublishLocked();
  // REQUIRES: mu_ held. The devices offered: those of GPUs not withheld.
  std::vector<dra::DraDevice> OfferedLocked() const;

  dra::ClaimPreparer* const preparer_;
  const std::string driver_;
  mutable std::mutex mu_;
  dra::SlicePublisher* publisher_ = nullptr;          // protected by mu_
  std::vector<dra::DraDevice> published_;             // protected by mu_: the slices' devices
  std::map<std::string, DraTaint> published_taints_;  // protected by mu_
  dra::DraServer* server_ = nullptr;                  // protected by mu_
  std::vector<dra::DraDevice> devices_;               // protected by mu_
  std::string pool_;                                  // protected by mu_
  EffectOf effect_of_;                                // protected by mu_
  health::HealthLedger ledger_;                       // protected by mu_
  std::map<std::string, std::string> withheld_;       // protected by mu_: GPU UUID -> holder
  size_t unhealthy_ = 0;                              // protected by mu_
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_DRA_HEALTH_H_
