// A ResourceClaim as the API server answers the DRA plugin's GET, and the
// names the kubelet sends: ParseAllocation (the claim's results and its
// opaque GpuConfig parameters, which users write) and ValidateClaimRef.
// Nothing may crash or recurse past base/json's depth; what is taken must
// be what the claim holds.
//
// Input: `<namespace>\0<name>\0<uid>\0<claim JSON>`.
#include <string>

#include "base/json.h"
#include "dra/claim_preparer.h"
#include "fuzz_support.h"

using namespace gpu_agent;
using namespace gpu_agent::dra;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::QuietLogs();
  const std::vector<std::string_view> parts = fuzz::Split(fuzz::AsView(data, size), '\0', 4);
  if (parts.size() != 4) return 0;
  const ClaimRef ref{std::string(parts[0]), std::string(parts[2]), std::string(parts[1])};
  const absl::Status valid = ValidateClaimRef(ref);
  if (valid.ok()) {
    for (const char c : ref.uid) {
      fuzz::Check(c != '/' && c != '.' && c != '\0', "a UID that is no file name was taken");
    }
    fuzz::Check(
        ref.name_space.find('/') == std::string::npos && ref.name.find('/') == std::string::npos,
        "a name with '/' was taken");
  } else {
    fuzz::Check(!valid.message().empty(), "a refused claim without a message");
  }
  const std::string claim(parts[3]);
  absl::StatusOr<std::vector<AllocatedDevice>> got =
      ParseAllocation(claim, ref, "gpu.gpu-agent.github.io", "node-a");
  if (!got.ok()) {
    fuzz::Check(!got.status().message().empty(), "a refused claim without a message");
    return 0;
  }
  fuzz::Check(json::NestingDepth(claim, json::kMaxDepth) <= json::kMaxDepth,
              "a claim nested past the limit was taken");
  fuzz::Check(!got->empty(), "a claim taken with no device of ours");
  for (const AllocatedDevice& d : *got) {
    fuzz::Check(!d.device.empty(), "a result without a device was taken");
    fuzz::Check(d.time_slice.empty() || TimeSliceLevel(d.time_slice) >= 0,
                "a time slice the driver does not know was taken");
  }
  return 0;
}
