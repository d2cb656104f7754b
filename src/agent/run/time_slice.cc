#include "agent/run/time_slice.h"

#include <unistd.h>

#include <vector>

#include "base/file_util.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "dra/claim_preparer.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

TimeSlicer NvidiaSmiTimeSlicer(const std::string& driver_root_here) {
  return [root = driver_root_here](const std::string& uuid,
                                   const std::string& interval) -> absl::Status {
    const int level = dra::TimeSliceLevel(interval);
    if (level < 0) {
      return absl::InvalidArgumentError(
          StrCat("time-slicing interval \"", interval, "\" is not Default, Short, Medium or Long"));
    }
    const std::string smi = JoinRoot(root, "/usr/bin/nvidia-smi");
    if (::access(smi.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          StrCat(smi, " is not there or not executable (nvidia.driverRoot: ", root,
                 "); it sets the time slice, which NVML cannot"));
    }
    ProgramRun run;
    run.timeout = std::chrono::seconds(10);
    run.max_output = 64 << 10;
    run.env.push_back(StrCat("LD_LIBRARY_PATH=", StrJoin(nvml::LibrarySearchFolders(root), ":")));
    absl::StatusOr<ProgramResult> r =
        RunProgram({smi, "compute-policy", "-i", uuid, StrCat("--set-timeslice=", level)}, run);
    if (!r.ok()) return r.status();
    if (!r->ok()) {
      const std::string said(StripWhitespace(r->err.empty() ? r->out : r->err));
      return absl::FailedPreconditionError(
          StrCat(smi, " compute-policy failed (", r->How(), "): ", Printable(said, 300)));
    }
    return absl::OkStatus();
  };
}

}  // namespace gpu_agent
