#include "health/health_ledger.h"

#include <algorithm>

namespace gpu_agent::health {

bool HealthLedger::Healthy(const DeviceKey& device) const {
  return std::none_of(out_.begin(), out_.end(),
                      [&device](const DeviceKey& out) { return out.Covers(device); });
}

}  // namespace gpu_agent::health
