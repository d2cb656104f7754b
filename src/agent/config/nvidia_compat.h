// Flags and env vars of NVIDIA's device plugin (v0.13 to v0.20) that
// gpu-agent accepts so NVIDIA's command lines run unchanged, but does not act
// on. The ones it does act on are settings (config_schema.h) or their aliases.
#ifndef GPU_AGENT_AGENT_CONFIG_NVIDIA_COMPAT_H_
#define GPU_AGENT_AGENT_CONFIG_NVIDIA_COMPAT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent/config/config_loader.h"

namespace gpu_agent {

enum class IgnoredFlagKind { kBool, kString, kChoice, kIntList, kStringList };

struct IgnoredNvidiaFlag {
  std::string_view flag;  // without "--"
  std::string_view env;
  IgnoredFlagKind kind;
  std::vector<std::string_view> choices;  // kChoice only
  std::string_view reason;                // why gpu-agent does not need it
};

// Every such flag, in NVIDIA's order.
const std::vector<IgnoredNvidiaFlag>& IgnoredNvidiaFlags();

// Checks `value` as NVIDIA's plugin would parse it (a bool, a choice, a list
// of whole numbers), so a typo is still an error. The message names neither
// the flag nor the env var; the caller adds which one it came from.
absl::Status CheckIgnoredValue(const IgnoredNvidiaFlag& f, std::string_view value);

// The line logged at start: `<where>=<value> is ignored: <reason>`.
std::string IgnoredNote(const IgnoredNvidiaFlag& f, std::string_view where, std::string_view value);

// Checks the values of the NVIDIA flags and env vars given that gpu-agent
// does not act on, and of the settings kept only so NVIDIA's files load;
// each one given (and good) adds a note to `out`, logged at start. A bad
// value is an error naming the flag or env var.
absl::Status NoteIgnoredNvidiaOptions(const ConfigRequest& request, LoadedConfig* out);

// Program names under which the binary runs as `gpu-agent run`.
inline constexpr std::string_view kNvidiaPluginProgram = "nvidia-device-plugin";

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_NVIDIA_COMPAT_H_
