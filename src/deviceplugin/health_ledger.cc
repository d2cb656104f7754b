#include "deviceplugin/health_ledger.h"

#include <algorithm>

namespace gpu_agent::deviceplugin {

bool HealthLedger::Healthy(const PluginDevice& device) const {
  return std::none_of(out_.begin(), out_.end(),
                      [&device](const DeviceKey& out) { return out.Covers(device.key); });
}

bool HealthLedger::Apply(std::vector<PluginDevice>* devices) const {
  bool changed = false;
  for (PluginDevice& d : *devices) {
    const bool healthy = Healthy(d);
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
