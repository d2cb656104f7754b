// One table of every scalar setting: its YAML key, flag, env var, type and
// accepted values. Parsing (file, env, flags), the check of each value and
// the `config` subcommand's report all walk this table, so a setting is
// declared once; rules across settings are in config_validation.h.
#ifndef GPU_AGENT_AGENT_CONFIG_CONFIG_SCHEMA_H_
#define GPU_AGENT_AGENT_CONFIG_CONFIG_SCHEMA_H_

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "agent/config/config.h"

namespace gpu_agent {

enum class SettingKind { kString, kBool, kInt, kEnum, kStringList, kIntList, kDuration };

using FieldRef = std::variant<std::string*, bool*, int*, Duration*, std::vector<std::string>*,
                              std::vector<int>*>;

struct Setting {
  std::string_view key;   // dotted YAML path, e.g. "flags.plugin.passDeviceSpecs"
  std::string_view flag;  // long flag without "--", or empty for file-only settings
  std::string_view env;   // env var, or empty
  SettingKind kind;
  std::vector<std::string_view> choices;  // kEnum, and each item of an enum-valued list
  std::string_view help;
  FieldRef (*ref)(Config&);
};

// Every setting, in the order `gpu-agent config` prints them.
const std::vector<Setting>& Settings();
const Setting* FindSetting(std::string_view key);
const Setting* FindSettingByFlag(std::string_view flag);

// Second names NVIDIA's plugin accepts for a setting (it renamed some flags
// and kept the old ones). When both env vars are set, the table's own wins.
struct SettingAlias {
  std::string_view key;
  std::string_view flag;  // without "--"
  std::string_view env;
};
const std::vector<SettingAlias>& SettingAliases();

// YAML paths that are mappings (so "flags", "flags.plugin", ...), and keys
// NVIDIA's schema has that the agent accepts and ignores.
bool IsSettingPrefix(std::string_view key);
bool IsIgnoredCompatKey(std::string_view key);
// The keys allowed directly under `prefix` ("" for the top level), for
// did-you-mean suggestions.
std::vector<std::string> ChildKeys(std::string_view prefix);

// How a value is written where it came from. Flags and env vars take
// booleans as NVIDIA's Go code does (strconv.ParseBool); a YAML file also
// takes YAML 1.1's yes/no/on/off, as NVIDIA's YAML reader does.
enum class ValueSyntax { kGo, kYaml };

// strconv.ParseBool: 1, t, T, TRUE, true, True and 0, f, F, FALSE, false,
// False; anything else is nullopt.
std::optional<bool> ParseGoBool(std::string_view v);
inline constexpr std::string_view kGoBoolExpectation =
    "expected a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)";

// Parses `items` (one scalar, or several for list kinds) into the field.
// Errors name the setting and the accepted values, but not where the value
// came from; the caller adds that.
absl::Status ApplySetting(const Setting& s, const std::vector<std::string>& items, Config* config,
                          ValueSyntax syntax = ValueSyntax::kGo);

// The value as it would be written in YAML (lists as "[a, b]").
std::string FormatSetting(const Setting& s, Config& config);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_CONFIG_SCHEMA_H_
