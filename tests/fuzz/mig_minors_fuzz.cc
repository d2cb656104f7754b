// <procRoot>/driver/nvidia-caps/mig-minors as the driver writes it, and the
// capability nodes looked up from it.
#include "fuzz_support.h"
#include "nvml/mig_minors.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<nvml::MigMinors> m =
      nvml::MigMinors::Parse(fuzz::AsView(data, size), "/proc/driver/nvidia-caps/mig-minors");
  if (!m.ok()) {
    fuzz::Check(!m.status().message().empty(), "error without a message");
    return 0;
  }
  for (int gpu : {0, 1, 7}) {
    for (int gi : {0, 1, 2, 13}) {
      absl::StatusOr<std::vector<std::string>> nodes = m->DeviceNodes(gpu, gi, 0);
      if (nodes.ok()) fuzz::Check(nodes->size() == 2, "not two capability nodes");
    }
  }
  return 0;
}
