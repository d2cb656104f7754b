// What static mode keeps in the Node's capacity: what plugin mode would
// advertise, counted. Healthy devices per resource of one generation's plan,
// kept up to date from the health watcher's reports.
#ifndef GPU_AGENT_AGENT_RUN_DESIRED_CAPACITIES_H_
#define GPU_AGENT_AGENT_RUN_DESIRED_CAPACITIES_H_

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/plan/device_model.h"
#include "agent/plan/resource_plan.h"
#include "agent/run/capacity_reconciler.h"
#include "deviceplugin/device.h"
#include "deviceplugin/health_ledger.h"
#include "health/health_watcher.h"

namespace gpu_agent {

// Thread-safe: reports come on the watcher's thread, reads from any.
class DesiredCapacities {
 public:
  // Devices start as the plan has them, the model's GPUs watched (a GPU lost at discovery out) and
  // follow the health watcher, the one source of device health, from its
  // first report on; it reports what is out at start (lost at discovery,
  // carried over a reload, a reset pending) before Start() returns.
  DesiredCapacities(const DeviceModel& model, const ResourcePlan& plan);

  // Healthy devices by resource name; every resource of the plan is named.
  apiserver::Capacities Value() const;

  // Records a report of the health watcher; returns the count after it.
  apiserver::Capacities Apply(const health::HealthChange& change);

  // What to start the health watcher with.
  const std::vector<std::string>& uuids() const { return uuids_; }
  const std::set<std::string>& initially_unhealthy() const { return initially_unhealthy_; }

 private:
  apiserver::Capacities Count() const;  // REQUIRES: mu_ held

  // Constant after construction.
  const std::vector<std::string> uuids_;
  const std::set<std::string> initially_unhealthy_;

  mutable std::mutex mu_;
  std::vector<deviceplugin::ResourceSpec> resources_;  // devices' health protected by mu_
  health::HealthLedger ledger_;                        // protected by mu_
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_DESIRED_CAPACITIES_H_
