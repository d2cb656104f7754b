// Command-line front end: parses subcommands and flags, loads the config and
// dispatches. Kept apart from main.cc so tests can drive it.
#ifndef GPU_AGENT_AGENT_CLI_CLI_H_
#define GPU_AGENT_AGENT_CLI_CLI_H_

#include <functional>
#include <string>

#include "agent/cli/capacity_command.h"
#include "agent/cli/cdi_command.h"
#include "agent/cli/config_command.h"
#include "agent/cli/devices_command.h"
#include "agent/cli/dra_command.h"
#include "agent/cli/health_command.h"
#include "agent/cli/labels_command.h"
#include "agent/run/run_command.h"

namespace gpu_agent {

// What RunCli calls once the command line is parsed and the config loaded:
// the real subcommands by default; the CLI fuzz target stops here.
struct CliCommands {
  std::function<int(const LoadedConfig&, const std::string& output)> devices = DevicesCommand;
  std::function<int(const LoadedConfig&, const std::string& output)> health = HealthCommand;
  std::function<int(const LoadedConfig&, const CapacityRequest&)> capacity = CapacityCommand;
  std::function<int(const LoadedConfig&, const std::string& format, const std::string& output)>
      cdi_generate = CdiGenerateCommand;
  std::function<int(const LoadedConfig&, const std::string& output)> dra_slices = DraSlicesCommand;
  std::function<int(const LoadedConfig&, const LabelsRequest&)> labels = LabelsCommand;
  std::function<int(LoadedConfig&, const ConfigCommandOptions&)> config = ConfigCommand;
  std::function<int(const ConfigRequest&, LoadedConfig)> run = RunCommand;
};

// Runs `gpu-agent <subcommand> ...`; returns the exit code.
int RunCli(int argc, char** argv, const CliCommands& commands = CliCommands());

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_CLI_H_
