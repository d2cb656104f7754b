// Runs another program to its end: its output captured, bounded in time and
// size. Used where the agent must ask a tool (a kubeconfig's exec
// credential plugin, nvidia-smi for what NVML does not offer).
#ifndef GPU_AGENT_BASE_SUBPROCESS_H_
#define GPU_AGENT_BASE_SUBPROCESS_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpu_agent {

struct ProgramRun {
  std::chrono::milliseconds timeout{30000};
  size_t max_output = 1 << 20;  // stdout and stderr, each
  // NAME=value entries added to (or replacing) the agent's environment.
  std::vector<std::string> env;
};

struct ProgramResult {
  bool exited = false;  // else killed by `signal`
  int exit_code = -1;
  int signal = 0;
  std::string out, err;
  bool ok() const { return exited && exit_code == 0; }
  // "exit code 3" or "signal 9".
  std::string How() const;
};

// Runs argv[0] (looked up in PATH when it has no '/') with `argv`, stdin
// from /dev/null and no signal blocked, in a process group of its own, and
// waits for it. Errors: it cannot be started (pipe or fork failed), it ran
// past `timeout` or printed more than `max_output` (its whole process group
// killed, then: nothing it started is left running). A program that cannot be executed
// exits 127, as from a shell, with the reason on its stderr.
absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                         const ProgramRun& run = {});

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_SUBPROCESS_H_
