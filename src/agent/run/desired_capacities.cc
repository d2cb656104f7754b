#include "agent/run/desired_capacities.h"

namespace gpu_agent {

DesiredCapacities::DesiredCapacities(const DeviceModel& model, const ResourcePlan& plan)
    : uuids_(model.gpu_uuids),
      initially_unhealthy_(model.initially_unhealthy),
      resources_(plan.resources) {}

apiserver::Capacities DesiredCapacities::Value() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Count();
}

apiserver::Capacities DesiredCapacities::Apply(const health::HealthChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ledger_.Set(change.key, change.healthy)) {
    for (deviceplugin::ResourceSpec& r : resources_) deviceplugin::ApplyHealth(ledger_, &r.devices);
  }
  return Count();
}

apiserver::Capacities DesiredCapacities::Count() const {
  apiserver::Capacities out;
  for (const deviceplugin::ResourceSpec& r : resources_) {
    out[r.resource_name] += static_cast<int64_t>(deviceplugin::CountHealthy(r.devices));
  }
  return out;
}

}  // namespace gpu_agent
