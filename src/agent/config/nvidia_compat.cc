#include "agent/config/nvidia_compat.h"

#include <algorithm>
#include <optional>

#include "agent/config/config_schema.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {

using K = IgnoredFlagKind;

const std::vector<IgnoredNvidiaFlag>& IgnoredNvidiaFlags() {
  static const auto* flags = new std::vector<IgnoredNvidiaFlag>{
      {"restart-on-device-unhealthy",
       "RESTART_ON_DEVICE_UNHEALTHY",
       K::kBool,
       {},
       "gpu-agent brings an unhealthy GPU back by itself (health.recoveryPeriod) and never "
       "restarts for one"},
      {"gdrcopy-enabled",
       "GDRCOPY_ENABLED",
       K::kBool,
       {},
       "Allocate sets no NVIDIA_GDRCOPY; give the pod NVIDIA_GDRCOPY=enabled itself"},
      {"mps-root",
       "MPS_ROOT",
       K::kString,
       {},
       "gpu-agent has no MPS sharing (sharing.mps is refused), so it needs no MPS folder"},
      {"device-discovery-strategy",
       "DEVICE_DISCOVERY_STRATEGY",
       K::kChoice,
       {"auto", "nvml", "tegra"},
       "gpu-agent finds GPUs through NVML only (what auto picks on a discrete-GPU node)"},
      {"imex-channel-ids",
       "IMEX_CHANNEL_IDS",
       K::kIntList,
       {},
       "gpu-agent does not inject IMEX channels"},
      {"imex-required", "IMEX_REQUIRED", K::kBool, {}, "gpu-agent does not inject IMEX channels"},
      {"cdi-feature-flags",
       "CDI_FEATURE_FLAGS",
       K::kStringList,
       {},
       "gpu-agent writes its own CDI spec, which has no feature flags"},
  };
  return *flags;
}

absl::Status CheckIgnoredValue(const IgnoredNvidiaFlag& f, std::string_view value) {
  switch (f.kind) {
    case K::kBool:
      if (ParseGoBool(value)) return absl::OkStatus();
      return absl::InvalidArgumentError(
          StrCat("invalid value \"", value, "\": ", kGoBoolExpectation));
    case K::kString:
    case K::kStringList:
      return absl::OkStatus();
    case K::kChoice: {
      const std::string_view v = StripWhitespace(value);
      if (std::find(f.choices.begin(), f.choices.end(), v) != f.choices.end()) {
        return absl::OkStatus();
      }
      std::vector<std::string> options(f.choices.begin(), f.choices.end());
      std::string msg =
          StrCat("invalid value \"", value, "\" (one of ", StrJoin(options, ", "), ")");
      if (std::string near = ClosestMatch(v, options); !near.empty()) {
        StrAppend(&msg, "; did you mean \"", near, "\"?");
      }
      return absl::InvalidArgumentError(msg);
    }
    case K::kIntList:
      for (std::string_view item : StrSplit(value, ',')) {
        item = StripWhitespace(item);
        int n = 0;
        if (!item.empty() && (!ParseInt(item, &n) || n < 0)) {
          return absl::InvalidArgumentError(
              StrCat("invalid value \"", item, "\": expected a list of whole numbers"));
        }
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

std::string IgnoredNote(const IgnoredNvidiaFlag& f, std::string_view where,
                        std::string_view value) {
  return StrCat(where, "=", value, " is ignored: ", f.reason);
}

absl::Status NoteIgnoredNvidiaOptions(const ConfigRequest& request, LoadedConfig* out) {
  for (const IgnoredNvidiaFlag& f : IgnoredNvidiaFlags()) {
    std::string where;
    std::optional<std::string> value;
    for (const auto& [flag, raw] : request.ignored_flags) {
      if (flag == f.flag) {
        where = StrCat("flag --", f.flag);
        value = raw;
      }
    }
    if (!value) {
      value = request.env(std::string(f.env));
      if (!value || value->empty()) continue;
      where = StrCat("env ", f.env);
    }
    if (absl::Status s = CheckIgnoredValue(f, *value); !s.ok()) {
      return absl::InvalidArgumentError(StrCat(where, ": ", s.message()));
    }
    if (f.flag == "imex-required" && ParseGoBool(*value).value_or(false)) {
      // A workload that needs IMEX channels would fail only inside its pod.
      out->warnings.push_back(StrCat(where, "=", *value,
                                     ": IMEX channels are not provided by gpu-agent; pods that "
                                     "need them (multi-node NVLink) will not find "
                                     "/dev/nvidia-caps-imex-channels"));
      continue;
    }
    out->notes.push_back(IgnoredNote(f, where, *value));
  }
  // Settings kept only so NVIDIA's flags and files load: noted when they ask
  // for something.
  const std::pair<const char*, bool> unused[] = {
      {"flags.gdsEnabled", out->config.flags.gds_enabled},
      {"flags.mofedEnabled", out->config.flags.mofed_enabled},
  };
  for (const auto& [key, on] : unused) {
    if (!on) continue;
    const Setting* s = FindSetting(key);
    auto it = out->origins.find(key);
    const std::string from = it == out->origins.end() ? "" : StrCat(" (", it->second.detail, ")");
    // The setting's help says why ("ignored: ...").
    out->notes.push_back(StrCat(key, "=true", from, " is ", s->help));
  }
  return absl::OkStatus();
}

}  // namespace gpu_agent
