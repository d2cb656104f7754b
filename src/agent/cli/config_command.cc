// The `config` subcommand's report: every setting as YAML, each value
// commented with where it came from.
#include "agent/cli/config_command.h"

#include <cstdio>
#include <vector>

#include "agent/cli/plan_report.h"
#include "agent/config/config_schema.h"
#include "agent/config/dra_taints.h"
#include "agent/plan/generation.h"
#include "agent/plan/nvml_start.h"
#include "base/exit_code.h"
#include "base/strings.h"
#include "health/health_check_catalog.h"

namespace gpu_agent {
namespace {

bool NeedsYamlQuotes(const std::string& v) {
  if (v.empty() || v == "\"\"") return false;
  if (v.front() == '[') return false;  // our own list rendering
  if (v.front() == ' ' || v.back() == ' ') return true;
  return v.find_first_of(":#{}&*!|>'\"%@`,") != std::string::npos;
}

std::string OriginText(const LoadedConfig& loaded, std::string_view key) {
  auto it = loaded.origins.find(std::string(key));
  if (it == loaded.origins.end()) return "default";
  switch (it->second.source) {
    case ValueSource::kFile:
      return StrCat("file ", it->second.detail);
    default:
      return it->second.detail;
  }
}

void EmitLine(std::string* out, int depth, const std::string& text, const std::string& origin) {
  std::string line = std::string(static_cast<size_t>(depth) * 2, ' ') + text;
  if (line.size() < 52) line.resize(52, ' ');
  StrAppend(out, line, "  # ", origin, "\n");
}

}  // namespace

std::string ConfigReport(LoadedConfig& loaded) {
  std::string out =
      StrCat("# gpu-agent effective configuration",
             loaded.file.empty() ? " (no config file)" : StrCat(" (file ", loaded.file, ")"),
             "\n# precedence: flag > env > file > default\n");
  std::vector<std::string> open;  // currently open mapping path segments
  auto open_to = [&](const std::vector<std::string>& parents) {
    size_t common = 0;
    while (common < open.size() && common < parents.size() && open[common] == parents[common]) {
      ++common;
    }
    open.resize(common);
    for (size_t i = common; i < parents.size(); ++i) {
      StrAppend(&out, std::string(i * 2, ' '), parents[i], ":\n");
      open.push_back(parents[i]);
    }
  };
  auto split = [](std::string_view key) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string_view::npos; start = dot + 1) {
      parts.emplace_back(key.substr(start, dot - start));
    }
    parts.emplace_back(key.substr(start));
    return parts;
  };
  for (const Setting& s : Settings()) {
    std::vector<std::string> parts = split(s.key);
    const std::string leaf = parts.back();
    parts.pop_back();
    open_to(parts);
    std::string value = FormatSetting(s, loaded.config);
    if (NeedsYamlQuotes(value)) value = StrCat("\"", value, "\"");
    EmitLine(&out, static_cast<int>(parts.size()), StrCat(leaf, ": ", value),
             OriginText(loaded, s.key));
    if (s.key == "health.nodeEvents") {
      // health.checks.<name>: {severity, threshold}, every check.
      const std::string origin = OriginText(loaded, "health.checks");
      EmitLine(&out, 1, "checks:", origin);
      for (const health::CheckSpec& spec : health::CheckSpecs()) {
        const health::CheckSetting& set = loaded.config.health.checks[spec.id];
        std::string line =
            StrCat(spec.name, ": {severity: ", health::SeveritySettingName(set.severity));
        if (spec.has_threshold) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%g", set.threshold);
          StrAppend(&line, ", threshold: ", buf);
        }
        StrAppend(&out, "    ", line, "}\n");
      }
    }
    if (s.key == "dra.podUid") {
      // dra.taints.<cause>: each cause's taint effect, set or default.
      EmitLine(&out, 1, "taints:", OriginText(loaded, "dra.taints"));
      for (const std::string& cause : DraTaintCauses()) {
        StrAppend(&out, "    ", cause, ": ", DraTaintEffect(loaded.config, cause), "\n");
      }
    }
    if (s.key == "sharing.timeSlicing.failRequestsGreaterThanOne") {
      const auto& resources = loaded.config.sharing.time_slicing.resources;
      const std::string origin = OriginText(loaded, "sharing.timeSlicing.resources");
      if (resources.empty()) {
        EmitLine(&out, 2, "resources: []", origin);
      } else {
        EmitLine(&out, 2, "resources:", origin);
        for (const TimeSlicingResource& r : resources) {
          StrAppend(&out, "    - name: ", r.name, "\n      replicas: ", r.replicas, "\n");
          if (!r.rename.empty()) StrAppend(&out, "      rename: ", r.rename, "\n");
          if (r.device_count > 0) {
            StrAppend(&out, "      devices: ", r.device_count, "\n");
          } else {
            StrAppend(&out, "      devices: [", StrJoin(r.devices, ", "), "]\n");
          }
        }
      }
    }
  }
  for (const std::string& w : loaded.warnings) StrAppend(&out, "# warning: ", w, "\n");
  for (const std::string& note : loaded.notes) StrAppend(&out, "# note: ", note, "\n");
  return out;
}

int ConfigCommand(LoadedConfig& loaded, const ConfigCommandOptions& options) {
  if (!options.plan && (options.output == "json" || options.output == "text")) {
    std::fprintf(stderr,
                 "gpu-agent: config: -o %s is for --plan; the config itself is printed as "
                 "YAML\n",
                 options.output.c_str());
    return kExitUsage;
  }
  // As `run` starts: NVML, the GPUs, then the generation.
  absl::StatusOr<Discovered> found = DiscoverGpus(loaded.config);
  std::shared_ptr<const Generation> gen;
  if (found.ok()) {
    absl::StatusOr<std::shared_ptr<const Generation>> built =
        BuildGeneration(loaded, std::move(found->inventory), GenerationOptionsFor(loaded.config));
    if (!built.ok()) {
      std::fprintf(stderr,
                   "gpu-agent: config error: the config cannot be served on this node: %s\n",
                   std::string(built.status().message()).c_str());
      return ExitCodeFor(built.status());
    }
    gen = *std::move(built);
  } else if (options.plan) {
    std::fprintf(stderr, "gpu-agent: config --plan: nothing to plan without NVML: %s\n",
                 std::string(found.status().message()).c_str());
    return kExitFailure;
  }
  const std::string text = options.plan
                               ? PlanReport(*gen, options.output.empty() ? "text" : options.output)
                               : ConfigReport(loaded);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (gen) {
    for (const std::string& w : gen->warnings) {
      std::fprintf(stderr, "gpu-agent: warning: %s\n", w.c_str());
    }
  } else {
    std::fprintf(stderr,
                 "gpu-agent: note: NVML cannot be started (%s); the config was checked, the "
                 "checks against this node's GPUs (devices, MIG strategy, sharing, CDI spec) "
                 "were skipped\n",
                 std::string(found.status().message()).c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace gpu_agent
