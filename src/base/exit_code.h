// The process exit codes the subcommands return: 0 ok, 1 runtime failure,
// 2 usage or config error.
#ifndef GPU_AGENT_BASE_EXIT_CODE_H_
#define GPU_AGENT_BASE_EXIT_CODE_H_

#include "absl/status/status.h"

namespace gpu_agent {

enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

// How to exit after `status`: kInvalidArgument (a setting, flag or file in
// error) is a usage error; any other failure a runtime one.
inline int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_EXIT_CODE_H_
