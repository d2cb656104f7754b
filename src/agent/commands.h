// The subcommands behind the CLI. Each returns the process exit code:
// 0 ok, 1 runtime failure, 2 usage or config error.
#ifndef GPU_AGENT_AGENT_COMMANDS_H_
#define GPU_AGENT_AGENT_COMMANDS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/config_loader.h"
#include "nvml/nvml_library.h"

namespace gpu_agent {

enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

// Loads NVML under the configured driver root and initialises it.
absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> StartNvml(const Config& config);

int DevicesCommand(const LoadedConfig& loaded, const std::string& output);
int ConfigCommand(LoadedConfig& loaded);
int RunCommand(const ConfigRequest& request, LoadedConfig loaded);

// The effective configuration as YAML, each value commented with its origin.
std::string ConfigReport(LoadedConfig& loaded);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_COMMANDS_H_
