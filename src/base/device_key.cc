#include "base/device_key.h"

#include "base/strings.h"

namespace gpu_agent {

std::string DeviceKey::ToString() const {
  if (gpu_instance < 0) return uuid;
  return compute_instance < 0
             ? StrCat(uuid, " GPU instance ", gpu_instance)
             : StrCat(uuid, " GPU instance ", gpu_instance, " compute instance ", compute_instance);
}

}  // namespace gpu_agent
