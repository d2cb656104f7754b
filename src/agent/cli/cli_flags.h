// How the config's settings become command-line flags: one flag per setting
// (with its NVIDIA-compatible aliases and env names in the help), the
// NVIDIA flags gpu-agent accepts and ignores, sections by mode in `run
// --help`, and what was given read back into a ConfigRequest.
#ifndef GPU_AGENT_AGENT_CLI_CLI_FLAGS_H_
#define GPU_AGENT_AGENT_CLI_CLI_FLAGS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config_loader.h"

namespace gpu_agent {

// Flags shared by every subcommand that reads the config.
struct ConfigFlags {
  std::string config_file;
  CLI::Option* config_option = nullptr;
  std::map<std::string, std::string> raw;  // setting key -> text
  std::map<std::string, CLI::Option*> options;
  std::map<std::string, std::string> ignored_raw;  // NVIDIA flag -> text
  std::map<std::string, CLI::Option*> ignored_options;
};

// Which of the config flags a subcommand takes, and how its help shows them.
struct FlagSelection {
  std::function<bool(std::string_view key)> applies;  // empty: every setting
  bool nvidia_ignored = true;  // NVIDIA's flags that gpu-agent accepts and ignores
  bool grouped = false;        // help sections by mode
  bool node_alias = false;     // --node as a second name of --node-name
};

// Adds the config flags `sel` picks (and --config) to `cmd`; what is given
// lands in `flags`.
void AddConfigFlags(CLI::App* cmd, ConfigFlags* flags, const FlagSelection& sel = {});

// What `capacity <verb>` reads: the node, the resource, the connection, and
// for `set` what --discover counts with and whether allocatable is written.
std::function<bool(std::string_view)> CapacityApplies(const std::string& verb);

// Go's flag package takes `-name` as `--name`: rewrites each single-dash
// argument whose name is a long flag of `app` (or of a subcommand) to two
// dashes, up to a "--". Short flags (`-o`) are left as they are.
void AcceptSingleDashLongFlags(const CLI::App& app, std::vector<std::string>* args);

// What `devices`, `cdi generate` and `labels [apply|remove]` read ("print"
// for plain `labels`), so their help lists only those flags.
std::function<bool(std::string_view)> DevicesApplies();
std::function<bool(std::string_view)> CdiGenerateApplies();
// What `dra slices` reads: discovery, the MIG strategy, the driver and node.
std::function<bool(std::string_view)> DraSlicesApplies();
std::function<bool(std::string_view)> LabelsApplies(const std::string& verb);

// The config file and the flags given, for the loader.
ConfigRequest BuildRequest(const ConfigFlags& flags);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_CLI_FLAGS_H_
