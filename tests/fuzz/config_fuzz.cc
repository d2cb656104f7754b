// The whole config load path: a YAML file (written to a temp file and read
// back as the agent reads it), env vars and flags, validation, and the
// `gpu-agent config` report of what loaded.
//
// Input: "<yaml>\0<env lines NAME=value>\0<flag lines name=value>". YAML
// cannot hold a NUL (the loader refuses it), so NUL separates the parts. A
// flag line names a setting by flag ("mig-strategy") or by key
// ("flags.migStrategy"); unknown names are skipped, as the CLI would refuse
// them before loading.
#include <map>
#include <optional>
#include <string>

#include "agent/cli/config_command.h"
#include "agent/config/config_loader.h"
#include "agent/config/config_schema.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = fuzz::Split(fuzz::AsView(data, size), '\0', 3);
  ConfigRequest req;
  if (!parts[0].empty()) {
    req.file = fuzz::TempDir() + "/config.yaml";
    req.file_origin = "flag --config";
    fuzz::WriteFileOrDie(req.file, parts[0]);
  }
  std::map<std::string, std::string> env;
  if (parts.size() > 1) {
    for (std::string_view line : fuzz::Split(parts[1], '\n')) {
      const size_t eq = line.find('=');
      if (eq == std::string_view::npos) continue;
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
  }
  req.env = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  if (parts.size() > 2) {
    for (std::string_view line : fuzz::Split(parts[2], '\n')) {
      const size_t eq = line.find('=');
      if (eq == std::string_view::npos) continue;
      const std::string_view name = line.substr(0, eq);
      const Setting* s = FindSetting(name);
      if (s == nullptr) s = FindSettingByFlag(name);
      if (s == nullptr) continue;
      req.flags.emplace_back(std::string(s->key), std::string(line.substr(eq + 1)));
    }
  }
  absl::StatusOr<LoadedConfig> loaded = LoadConfig(req);
  if (loaded.ok()) {
    const std::string report = ConfigReport(*loaded);
    fuzz::Check(!report.empty(), "empty config report");
  } else {
    fuzz::Check(!loaded.status().message().empty(), "config error without a message");
  }
  return 0;
}
