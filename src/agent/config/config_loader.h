// Builds the effective Config from defaults, a YAML file, env vars and flags
// (precedence flag > env > file > default), remembering where each value came
// from. Never throws; every error names the file:line:column, env var or flag.
#ifndef GPU_AGENT_AGENT_CONFIG_CONFIG_LOADER_H_
#define GPU_AGENT_AGENT_CONFIG_CONFIG_LOADER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"

namespace gpu_agent {

enum class ValueSource { kDefault, kFile, kEnv, kFlag };

struct Origin {
  ValueSource source = ValueSource::kDefault;
  std::string detail;  // "config.yaml:3:5", "env MIG_STRATEGY", "flag --mig-strategy"
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment.
EnvLookup ProcessEnv();

struct ConfigRequest {
  std::string file;         // config file path; empty: none
  std::string file_origin;  // how it was named: "flag --config", "env CONFIG_FILE"
  // Setting key -> raw text, for each flag given on the command line.
  std::vector<std::pair<std::string, std::string>> flags;
  // NVIDIA flag name (without "--") -> raw text, for each flag of
  // IgnoredNvidiaFlags() given: checked, noted, not applied.
  std::vector<std::pair<std::string, std::string>> ignored_flags;
  EnvLookup env = ProcessEnv();
  // `config --strict`: an unknown key in the file is an error, not a warning.
  bool strict = false;
  // Whether a folder exists; the loader asks it about NVIDIA's chart layout
  // (/driver-root) when no container driver root is given.
  std::function<bool(const std::string&)> dir_exists = DirExists;
  static bool DirExists(const std::string& path);
};

// Where NVIDIA's Helm chart mounts the host's driver root in the container.
inline constexpr std::string_view kNvidiaChartDriverRoot = "/driver-root";

struct LoadedConfig {
  Config config;
  std::map<std::string, Origin> origins;  // by setting key; absent = default
  std::string file;
  std::vector<std::string> notes;  // accepted-but-ignored keys and the like
  // What the user should act on (logged at warning level): unknown keys,
  // fields read as NVIDIA reads them, features gpu-agent does not provide.
  std::vector<std::string> warnings;
  std::vector<std::string> unknown_keys;  // "file:line:col: key", for --strict
};

// Loads and validates. Config errors are kInvalidArgument; an unreadable file
// is kNotFound or kPermissionDenied.
absl::StatusOr<LoadedConfig> LoadConfig(const ConfigRequest& request);

// Parses YAML text into `out` (on top of what it holds). `filename` is used in
// messages. Exposed for tests and benchmarks.
absl::Status ParseConfigYaml(std::string_view text, const std::string& filename, LoadedConfig* out);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_CONFIG_LOADER_H_
