#include "agent/config/config_loader.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "agent/config/config_schema.h"
#include "agent/config/config_validation.h"
#include "agent/config/dra_taints.h"
#include "agent/config/nvidia_compat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

absl::StatusOr<std::string> ReadConfigFile(const std::string& path, const std::string& origin) {
  // A regular file of bounded size: a FIFO or a device named by mistake (or
  // on purpose) is refused at once, never waited on or read without end.
  absl::StatusOr<std::string> text = ReadFileBounded(path, kMaxConfigBytes);
  if (text.ok()) return text;
  const absl::string_view message = text.status().message();
  std::string_view reason(message.data(), message.size());
  if (const std::string named = StrCat("cannot read \"", path, "\": "); reason.starts_with(named)) {
    reason.remove_prefix(named.size());
  }
  const std::string why =
      StrCat("cannot read config file \"", path, "\" (named by ", origin, "): ", reason);
  if (text.status().code() == absl::StatusCode::kInvalidArgument) {
    return absl::InvalidArgumentError(StrCat(why, "; is it the right file?"));
  }
  return absl::Status(text.status().code(), why);
}

std::vector<std::string> SplitList(std::string_view raw) {
  std::vector<std::string> items;
  for (std::string_view part : StrSplit(raw, ',')) {
    items.emplace_back(StripWhitespace(part));
  }
  return items;
}

// Raw text of an env var or flag as items: lists split on ','.
std::vector<std::string> ItemsOf(const Setting& s, const std::string& raw) {
  if (s.kind == SettingKind::kStringList || s.kind == SettingKind::kIntList) return SplitList(raw);
  return {raw};
}

absl::Status ApplyHealthEnv(const EnvLookup& env, LoadedConfig* out) {
  Config::Health& h = out->config.health;
  if (std::optional<std::string> v = env("DP_DISABLE_HEALTHCHECKS"); v && !v->empty()) {
    for (const std::string& item : SplitList(*v)) {
      if (item.empty()) continue;
      int xid = 0;
      if (item == "all" || item == "xids") {
        h.disabled = true;
        out->origins["health.disabled"] = Origin{ValueSource::kEnv, "env DP_DISABLE_HEALTHCHECKS"};
      } else if (ParseInt(item, &xid) && xid >= 0) {
        if (std::find(h.ignored_xids.begin(), h.ignored_xids.end(), xid) == h.ignored_xids.end()) {
          h.ignored_xids.push_back(xid);
        }
        out->origins["health.ignoredXids"] =
            Origin{ValueSource::kEnv, "env DP_DISABLE_HEALTHCHECKS"};
      } else {
        return absl::InvalidArgumentError(StrCat("env DP_DISABLE_HEALTHCHECKS=\"", *v, "\": \"",
                                                 item,
                                                 "\" is neither all, xids nor an XID number"));
      }
    }
  }
  if (std::optional<std::string> v = env("DP_ENABLE_HEALTHCHECKS"); v && !v->empty()) {
    for (const std::string& item : SplitList(*v)) {
      if (item.empty()) continue;
      int xid = 0;
      if (item == "all" || item == "xids") {
        h.disabled = false;
        h.ignored_xids.clear();
        out->origins["health.ignoredXids"] =
            Origin{ValueSource::kEnv, "env DP_ENABLE_HEALTHCHECKS"};
      } else if (ParseInt(item, &xid) && xid >= 0) {
        if (std::find(h.critical_xids.begin(), h.critical_xids.end(), xid) ==
            h.critical_xids.end()) {
          h.critical_xids.push_back(xid);
        }
        out->origins["health.criticalXids"] =
            Origin{ValueSource::kEnv, "env DP_ENABLE_HEALTHCHECKS"};
      } else {
        return absl::InvalidArgumentError(StrCat("env DP_ENABLE_HEALTHCHECKS=\"", *v, "\": \"",
                                                 item,
                                                 "\" is neither all, xids nor an XID number"));
      }
    }
  }
  return absl::OkStatus();
}

// NVIDIA's plugin (v0.20) ignores a time-sliced resource's devices and
// rename, with a warning. So does gpu-agent, unless the file opts in to its
// own meaning with sharing.timeSlicing.honor.
void ReadTimeSlicingAsNvidiaDoes(LoadedConfig* out) {
  Config::Sharing::TimeSlicing& ts = out->config.sharing.time_slicing;
  auto honoured = [&](std::string_view field) {
    return std::find(ts.honor.begin(), ts.honor.end(), field) != ts.honor.end();
  };
  auto where = [&]() {
    auto it = out->origins.find("sharing.timeSlicing.resources");
    return it == out->origins.end() ? std::string() : StrCat(it->second.detail, ": ");
  };
  for (TimeSlicingResource& r : ts.resources) {
    const bool all = r.device_count == 0 && r.devices == std::vector<std::string>{"all"};
    if (!all && !honoured("devices")) {
      out->warnings.push_back(StrCat(
          where(), "sharing.timeSlicing.resources[", r.name,
          "].devices is ignored: every GPU is shared, as NVIDIA's plugin does; to share only the "
          "listed GPUs, add \"honor: [devices]\" under sharing.timeSlicing"));
      r.devices = {"all"};
      r.device_count = 0;
    }
    if (!r.rename.empty() && !honoured("rename")) {
      out->warnings.push_back(StrCat(where(), "sharing.timeSlicing.resources[", r.name,
                                     "].rename (", r.rename,
                                     ") is ignored: replicas are advertised as ", r.name,
                                     ts.rename_by_default ? ".shared (renameByDefault)" : "",
                                     ", as NVIDIA's plugin does; to advertise them as ", r.rename,
                                     ", add \"honor: [rename]\" under sharing.timeSlicing"));
      r.rename.clear();
    }
  }
}

// NVIDIA's defaults for where the driver and device nodes are: the dev root
// is the driver root unless given, and in a container the host's driver
// root is at /driver-root (NVIDIA's Helm chart mounts it there). A process
// without that folder (on the host, or a runtime that injects the driver)
// finds the driver where the driver root says, as before.
void DefaultRootsAsNvidiaDoes(const ConfigRequest& request, LoadedConfig* out) {
  Config::Flags& f = out->config.flags;
  if (out->origins.count("flags.nvidiaDevRoot") == 0) {
    f.nvidia_dev_root = f.nvidia_driver_root;
    if (out->origins.count("flags.nvidiaDriverRoot") > 0) {
      out->origins["flags.nvidiaDevRoot"] =
          Origin{ValueSource::kDefault, "default: flags.nvidiaDriverRoot, as NVIDIA's plugin"};
    }
  }
  if (out->origins.count("flags.plugin.containerDriverRoot") == 0 &&
      request.dir_exists(std::string(kNvidiaChartDriverRoot))) {
    f.plugin.container_driver_root = std::string(kNvidiaChartDriverRoot);
    out->origins["flags.plugin.containerDriverRoot"] =
        Origin{ValueSource::kDefault,
               StrCat("default: ", kNvidiaChartDriverRoot, " exists (NVIDIA's Helm chart layout)")};
  }
}

}  // namespace

bool ConfigRequest::DirExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<LoadedConfig> LoadConfig(const ConfigRequest& request) {
  LoadedConfig out;
  if (!request.file.empty()) {
    absl::StatusOr<std::string> text = ReadConfigFile(request.file, request.file_origin);
    if (!text.ok()) return text.status();
    out.file = request.file;
    if (absl::Status s = ParseConfigYaml(*text, request.file, &out); !s.ok()) return s;
  }
  for (const Setting& s : Settings()) {
    if (s.env.empty()) continue;
    std::string_view env = s.env;
    std::optional<std::string> v = request.env(std::string(env));
    for (const SettingAlias& a : SettingAliases()) {
      if ((!v || v->empty()) && a.key == s.key && !a.env.empty()) {
        env = a.env;
        v = request.env(std::string(env));
      }
    }
    if (!v || v->empty()) continue;
    if (absl::Status st = ApplySetting(s, ItemsOf(s, *v), &out.config); !st.ok()) {
      return absl::InvalidArgumentError(StrCat("env ", env, ": ", st.message()));
    }
    out.origins[std::string(s.key)] = Origin{ValueSource::kEnv, StrCat("env ", env)};
  }
  if (absl::Status s = ApplyHealthEnv(request.env, &out); !s.ok()) return s;
  for (const auto& [key, raw] : request.flags) {
    const Setting* s = FindSetting(key);
    if (s == nullptr) return absl::InternalError(StrCat("no setting ", key));
    if (absl::Status st = ApplySetting(*s, ItemsOf(*s, raw), &out.config); !st.ok()) {
      return absl::InvalidArgumentError(StrCat("flag --", s->flag, ": ", st.message()));
    }
    out.origins[key] = Origin{ValueSource::kFlag, StrCat("flag --", s->flag)};
  }
  if (absl::Status s = NoteIgnoredNvidiaOptions(request, &out); !s.ok()) return s;
  if (request.strict && !out.unknown_keys.empty()) {
    return absl::InvalidArgumentError(
        StrCat(StrJoin(out.unknown_keys, "\n"), "\n(--strict: unknown keys are errors)"));
  }
  ReadTimeSlicingAsNvidiaDoes(&out);
  DefaultRootsAsNvidiaDoes(request, &out);
  if (absl::Status s = ValidateConfig(out.config); !s.ok()) {
    // Point at where the offending value came from when we know it.
    std::string msg(s.message());
    const std::string key = msg.substr(0, msg.find_first_of(":[ "));
    auto it = out.origins.find(key);
    if (it != out.origins.end()) msg = StrCat(it->second.detail, ": ", msg);
    return absl::InvalidArgumentError(msg);
  }
  return out;
}

}  // namespace gpu_agent
