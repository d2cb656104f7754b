#include "deviceplugin/health_ledger.h"

#include <algorithm>

namespace gpu_agent::deviceplugin {

bool ApplyHealth(const health::HealthLedger& ledger, std::vector<PluginDevice>* devices,
                 const std::set<std::string>& withheld) {
  bool changed = false;
  for (PluginDevice& d : *devices) {
    const bool healthy = ledger.Healthy(d.key) && withheld.count(d.key.uuid) == 0;
    changed = changed || d.healthy != healthy;
    d.healthy = healthy;
  }
  return changed;
}

size_t CountHealthy(const std::vector<PluginDevice>& devices) {
  return static_cast<size_t>(std::count_if(devices.begin(), devices.end(),
                                           [](const PluginDevice& d) { return d.healthy; }));
}

}  // namespace gpu_agent::deviceplugin
