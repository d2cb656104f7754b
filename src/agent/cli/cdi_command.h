// `gpu-agent cdi generate`: this node's CDI spec, printed or written to a file.
#ifndef GPU_AGENT_AGENT_CLI_CDI_COMMAND_H_
#define GPU_AGENT_AGENT_CLI_CDI_COMMAND_H_

#include <string>

#include "agent/config/config_loader.h"

namespace gpu_agent {

// Prints the spec (`output` empty or "-") or writes it to `output`
// atomically. `format` "json", "yaml" or empty: from the output file's
// extension, else yaml. Returns the exit code.
int CdiGenerateCommand(const LoadedConfig& loaded, const std::string& format,
                       const std::string& output);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_CDI_COMMAND_H_
