// The process exit codes the subcommands return: 0 ok, 1 runtime failure,
// 2 usage or config error.
#ifndef GPU_AGENT_AGENT_EXIT_CODE_H_
#define GPU_AGENT_AGENT_EXIT_CODE_H_

namespace gpu_agent {

enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_EXIT_CODE_H_
