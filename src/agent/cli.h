// Command-line front end: parses subcommands and flags, loads the config and
// dispatches. Kept apart from main.cc so tests can drive it.
#ifndef GPU_AGENT_AGENT_CLI_H_
#define GPU_AGENT_AGENT_CLI_H_

namespace gpu_agent {

// Runs `gpu-agent <subcommand> ...`; returns the exit code.
int RunCli(int argc, char** argv);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_H_
