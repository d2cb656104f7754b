// The compute time slices claims' GpuConfigs set: set as a claim is
// prepared, set back to Default when no prepared claim sets them.
#include <algorithm>

#include "base/log.h"
#include "base/strings.h"
#include "dra/claim_preparer.h"

namespace gpu_agent::dra {

std::string ClaimPreparer::SetTimeSlice(const DraDevice& device, const std::string& interval) {
  if (interval.empty()) return "";
  auto type = device.attributes.find("type");
  if (type != device.attributes.end() && type->second.text != "gpu") {
    return StrCat("device \"", device.name, "\" is a ", type->second.text,
                  " device; GpuConfig time-slicing applies to whole GPUs");
  }
  if (!options_.set_time_slice) {
    return StrCat("GpuConfig time-slicing (", interval, ") cannot be set on this node");
  }
  if (absl::Status s = options_.set_time_slice(device.uuid, interval); !s.ok()) {
    return StrCat("cannot set the time slice of device \"", device.name, "\" (", device.uuid,
                  ") to ", interval, ": ", s.message());
  }
  LogInfo("GPU time slice set",
          {{"device", device.name}, {"uuid", device.uuid}, {"interval", interval}});
  return "";
}

void ClaimPreparer::ResetTimeSlices(const std::vector<std::string>& uuids) {
  for (const std::string& uuid : uuids) {
    {
      // Still set by a claim prepared on the same GPU: left as it is.
      std::lock_guard<std::mutex> lock(mu_);
      bool held = false;
      for (const auto& [uid, e] : prepared_) {
        if (std::find(e.time_sliced.begin(), e.time_sliced.end(), uuid) != e.time_sliced.end()) {
          held = true;
        }
      }
      if (held) continue;
    }
    // A failure does not fail the unprepare: the kubelet would retry it,
    // and hold the pod, for a setting the next claim's GpuConfig sets anew.
    absl::Status s = options_.set_time_slice
                         ? options_.set_time_slice(uuid, kDefaultTimeSlice)
                         : absl::FailedPreconditionError("it cannot be set on this node");
    if (s.ok()) {
      LogInfo("GPU time slice set back to Default: no prepared claim sets it", {{"uuid", uuid}});
    } else {
      LogWarning(
          "cannot set a GPU's time slice back to Default after its claim; it keeps the claim's "
          "until a claim sets another",
          {{"uuid", uuid}, {"error", std::string(s.message())}});
    }
  }
}

}  // namespace gpu_agent::dra
