// The config file's YAML walked into settings: each key found in the
// settings table (config_schema.h) and applied with its position, NVIDIA's
// keys read as NVIDIA's plugin reads them, unknown keys recorded for
// --strict, and the lists (time-slicing resources, DRA taints, health
// checks) walked item by item.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "agent/config/config_loader.h"
#include "agent/config/config_schema.h"
#include "agent/config/dra_taints.h"
#include "agent/config/nvidia_compat.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

// Errors inside the YAML walk carry the node's position.
class YamlWalker {
 public:
  YamlWalker(const std::string& filename, LoadedConfig* out) : filename_(filename), out_(out) {}

  absl::Status Walk(const YAML::Node& root) {
    if (!root.IsMap()) {
      return Error(root, StrCat("the top level must be a mapping of keys (such as "
                                "\"version: v1\"), not ",
                                Describe(root)));
    }
    return WalkMap(root, "");
  }

 private:
  std::string Where(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null()) return filename_;
    return StrCat(filename_, ":", m.line + 1, ":", m.column + 1);
  }
  absl::Status Error(const YAML::Node& n, std::string_view msg) const {
    return absl::InvalidArgumentError(StrCat(Where(n), ": ", msg));
  }
  static std::string Describe(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Map:
        return "a mapping";
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Scalar:
        return StrCat("the value \"", Printable(n.Scalar(), 40), "\"");
      default:
        return "nothing";
    }
  }

  // YAML leaves a key given twice in one mapping to the reader, and
  // yaml-cpp keeps both: "mode: plugin" then "mode: static" would run one of
  // them without a word. Refused, naming both places.
  absl::Status NoDuplicateKeys(const YAML::Node& map, std::string_view in) const {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) continue;
      auto [it, first] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
      if (!first) {
        return Error(kv.first,
                     StrCat("the key \"", Printable(kv.first.Scalar(), 60), "\" appears twice", in,
                            " (first at line ", it->second.line + 1, "); give each key once"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status WalkMap(const YAML::Node& map, const std::string& prefix) {
    GA_RETURN_IF_ERROR(NoDuplicateKeys(map, prefix.empty() ? "" : StrCat(" in ", prefix)));
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) return Error(kv.first, "keys must be plain names");
      const std::string key = kv.first.Scalar();
      const std::string path = prefix.empty() ? key : StrCat(prefix, ".", key);
      const YAML::Node& value = kv.second;
      if (path == "sharing.timeSlicing.resources") {
        GA_RETURN_IF_ERROR(WalkResources(value));
        continue;
      }
      if (path == "health.checks") {
        GA_RETURN_IF_ERROR(WalkChecks(value));
        continue;
      }
      if (path == "dra.taints") {
        GA_RETURN_IF_ERROR(WalkDraTaints(value));
        continue;
      }
      if (path == "sharing.mps") {
        return Error(kv.first,
                     "sharing.mps (CUDA MPS) is not supported by gpu-agent; use "
                     "sharing.timeSlicing");
      }
      if (IsIgnoredCompatKey(path)) {
        if (path == "imex") {
          NoteImex(value);
          continue;
        }
        out_->notes.push_back(StrCat(Where(kv.first), ": ", path,
                                     " is accepted for compatibility and has no effect"));
        continue;
      }
      if (const Setting* s = FindSetting(path)) {
        GA_RETURN_IF_ERROR(ApplyNode(*s, kv.first, value));
        continue;
      }
      if (IsSettingPrefix(path)) {
        if (value.IsNull()) continue;
        if (!value.IsMap()) {
          return Error(value, StrCat(path, " must be a mapping, not ", Describe(value)));
        }
        GA_RETURN_IF_ERROR(WalkMap(value, path));
        continue;
      }
      UnknownKey(kv.first, key, prefix.empty() ? "" : StrCat(" in ", prefix), ChildKeys(prefix));
    }
    return absl::OkStatus();
  }

  // As NVIDIA's reader does, an unknown key is skipped; gpu-agent says so,
  // with the nearest known key. `config --strict` turns it into an error.
  void UnknownKey(const YAML::Node& at, const std::string& key, const std::string& where,
                  const std::vector<std::string>& known) {
    std::string msg = StrCat(Where(at), ": unknown key \"", Printable(key, 60), "\"", where);
    if (std::string near = ClosestMatch(key, known); !near.empty()) {
      StrAppend(&msg, "; did you mean \"", near, "\"?");
    }
    out_->unknown_keys.push_back(msg);
    out_->warnings.push_back(StrCat(msg, " (ignored, as NVIDIA's plugin ignores it)"));
  }

  // `<what> "<name>"` refused: the nearest of `known`, or all of them
  // (`plural` names them).
  static std::string UnknownName(std::string_view what, const std::string& name,
                                 const std::vector<std::string>& known, std::string_view plural) {
    std::string msg = StrCat(what, " \"", Printable(name, 60), "\"");
    if (std::string near = ClosestMatch(name, known); !near.empty()) {
      StrAppend(&msg, "; did you mean \"", near, "\"?");
    } else {
      StrAppend(&msg, "; the ", plural, " are ", StrJoin(known, ", "));
    }
    return msg;
  }

  // `<where>: <the value> is not one of <choices>`, with the nearest.
  static std::string NotOneOf(std::string_view where, const YAML::Node& v,
                              const std::vector<std::string>& choices) {
    std::string msg = StrCat(where, ": ", Describe(v), " is not one of ", StrJoin(choices, ", "));
    if (v.IsScalar()) {
      if (std::string near = ClosestMatch(v.Scalar(), choices); !near.empty()) {
        StrAppend(&msg, "; did you mean \"", near, "\"?");
      }
    }
    return msg;
  }

  // NVIDIA's imex section asks for channels gpu-agent does not provide: a
  // pod that needs them would fail only inside, so `required` is a warning.
  void NoteImex(const YAML::Node& imex) {
    const YAML::Node required = imex.IsMap() ? imex["required"] : YAML::Node();
    if (required && required.IsScalar() &&
        ParseGoBool(required.Scalar()).value_or(required.Scalar() == "yes")) {
      out_->warnings.push_back(StrCat(Where(required),
                                      ": imex.required is true, but IMEX channels are not "
                                      "provided by gpu-agent; pods that need them (multi-node "
                                      "NVLink) will not find /dev/nvidia-caps-imex-channels"));
      return;
    }
    out_->notes.push_back(
        StrCat(Where(imex), ": imex is accepted for compatibility and has no effect"));
  }

  // NVIDIA's resource names: a bare name is in the nvidia.com domain.
  static std::string ResourceName(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos) return name;
    return StrCat("nvidia.com/", name);
  }

  absl::Status ApplyNode(const Setting& s, const YAML::Node& key, const YAML::Node& value) {
    if (value.IsNull()) return absl::OkStatus();  // "key:" with nothing keeps the default
    std::vector<std::string> items;
    const bool list_kind = s.kind == SettingKind::kStringList || s.kind == SettingKind::kIntList;
    if (value.IsScalar()) {
      items.push_back(value.Scalar());
    } else if (value.IsSequence() && list_kind) {
      for (const YAML::Node& item : value) {
        if (!item.IsScalar()) {
          return Error(item,
                       StrCat(s.key, " must be a list of plain values, not of ", Describe(item)));
        }
        items.push_back(item.Scalar());
      }
    } else {
      return Error(value, StrCat(s.key, " must be ",
                                 list_kind ? "a value or a list of values" : "a single value",
                                 ", not ", Describe(value)));
    }
    if (s.key == "version" && items[0] != "v1") {
      return Error(value, StrCat("unknown config version \"", Printable(items[0], 40),
                                 "\"; gpu-agent reads version v1"));
    }
    absl::Status st = ApplySetting(s, items, &out_->config, ValueSyntax::kYaml);
    if (!st.ok()) return Error(value, std::string(st.message()));
    out_->origins[std::string(s.key)] = Origin{ValueSource::kFile, Where(key)};
    return absl::OkStatus();
  }

  absl::Status WalkResources(const YAML::Node& list) {
    if (list.IsNull()) return absl::OkStatus();
    if (!list.IsSequence()) {
      return Error(list, "sharing.timeSlicing.resources must be a list of {name, replicas}");
    }
    std::vector<TimeSlicingResource> resources;
    for (const YAML::Node& item : list) {
      if (!item.IsMap()) {
        return Error(item, StrCat("each sharing.timeSlicing.resources entry must be a "
                                  "mapping with name and replicas, not ",
                                  Describe(item)));
      }
      TimeSlicingResource r;
      bool has_replicas = false;
      GA_RETURN_IF_ERROR(NoDuplicateKeys(item, " in a sharing.timeSlicing.resources entry"));
      for (const auto& kv : item) {
        const std::string key = kv.first.Scalar();
        const YAML::Node& v = kv.second;
        if (key == "name" || key == "rename") {
          if (!v.IsScalar()) return Error(v, StrCat(key, " must be a resource name"));
          (key == "name" ? r.name : r.rename) = ResourceName(v.Scalar());
        } else if (key == "replicas") {
          int n = 0;
          if (!v.IsScalar() || !ParseInt(v.Scalar(), &n)) {
            return Error(v, StrCat("replicas must be a whole number, not ", Describe(v)));
          }
          r.replicas = n;
          has_replicas = true;
        } else if (key == "devices") {
          if (v.IsScalar()) {
            int n = 0;
            if (v.Scalar() == "all") {
              r.devices.push_back("all");
            } else if (ParseInt(v.Scalar(), &n) && n >= 1) {
              r.device_count = n;
            } else {
              return Error(v, StrCat("devices must be \"all\", a count of 1 or more, or a list of "
                                     "indexes or UUIDs, not \"",
                                     v.Scalar(), "\""));
            }
          } else if (v.IsSequence()) {
            for (const YAML::Node& d : v) {
              if (!d.IsScalar() || d.Scalar().empty()) {
                return Error(d, "devices entries are GPU indexes, UUIDs, MIG UUIDs or <gpu>:<mig>");
              }
              r.devices.push_back(d.Scalar());
            }
            if (r.devices.empty())
              return Error(v, "devices is an empty list; omit it to share all");
          } else {
            return Error(v, "devices must be \"all\", a count, or a list of indexes or UUIDs");
          }
        } else {
          UnknownKey(kv.first, key, " in a sharing.timeSlicing.resources entry",
                     {"name", "rename", "replicas", "devices"});
        }
      }
      if (r.name.empty()) return Error(item, "a sharing.timeSlicing.resources entry needs a name");
      if (!has_replicas) {
        return Error(item, "a sharing.timeSlicing.resources entry needs replicas");
      }
      if (r.replicas < 2) {
        return Error(item["replicas"], StrCat("replicas: ", r.replicas,
                                              " is too few; time-slicing needs at least 2"));
      }
      if (r.replicas > kMaxTimeSlicingReplicas) {
        return Error(item["replicas"],
                     StrCat("replicas: ", r.replicas, " is more than the ", kMaxTimeSlicingReplicas,
                            " a GPU may be shared by (each replica is a device the kubelet "
                            "tracks; see docs/mig-selection-sharing.md)"));
      }
      if (r.devices.empty() && r.device_count == 0) r.devices.push_back("all");
      resources.push_back(std::move(r));
    }
    out_->config.sharing.time_slicing.resources = std::move(resources);
    out_->origins["sharing.timeSlicing.resources"] = Origin{ValueSource::kFile, Where(list)};
    return absl::OkStatus();
  }

  // dra.taints: {<cause>: None|NoSchedule|NoExecute|off}, a cause being
  // lost, xid or a health check's name.
  absl::Status WalkDraTaints(const YAML::Node& map) {
    if (map.IsNull()) return absl::OkStatus();
    if (!map.IsMap()) {
      return Error(map, StrCat("dra.taints must be a mapping of causes (lost, xid, or a health "
                               "check's name) to a taint effect, not ",
                               Describe(map)));
    }
    GA_RETURN_IF_ERROR(NoDuplicateKeys(map, " in dra.taints"));
    std::vector<std::string> causes = DraTaintCauses();
    for (const auto& kv : map) {
      const std::string cause = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (std::find(causes.begin(), causes.end(), cause) == causes.end()) {
        return Error(kv.first, UnknownName("dra.taints: unknown cause", cause, causes, "causes"));
      }
      const YAML::Node& v = kv.second;
      const std::vector<std::string> effects = {"None", "NoSchedule", "NoExecute", "off"};
      if (!v.IsScalar() || std::find(effects.begin(), effects.end(), v.Scalar()) == effects.end()) {
        return Error(v, NotOneOf(StrCat("dra.taints.", cause), v, effects));
      }
      out_->config.dra.taints[cause] = v.Scalar();
    }
    out_->origins["dra.taints"] = Origin{ValueSource::kFile, Where(map)};
    return absl::OkStatus();
  }

  // health.checks: {<check>: {severity: unhealthy|degraded|ignore, threshold: N}}.
  absl::Status WalkChecks(const YAML::Node& map) {
    if (map.IsNull()) return absl::OkStatus();
    if (!map.IsMap()) {
      return Error(map, StrCat("health.checks must be a mapping of check names to {severity, "
                               "threshold}, not ",
                               Describe(map)));
    }
    health::CheckSettings& checks = out_->config.health.checks;
    GA_RETURN_IF_ERROR(NoDuplicateKeys(map, " in health.checks"));
    for (const auto& kv : map) {
      const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "";
      const health::CheckSpec* spec = health::FindCheck(name);
      if (spec == nullptr) {
        // A check that does not exist would silently do nothing: refused.
        return Error(kv.first,
                     UnknownName("unknown health check", name, health::CheckNames(), "checks"));
      }
      const YAML::Node& v = kv.second;
      if (v.IsNull()) continue;
      if (!v.IsMap()) {
        return Error(v, StrCat("health.checks.", name,
                               " must be a mapping with severity and/or "
                               "threshold, not ",
                               Describe(v)));
      }
      health::CheckSetting& setting = checks[spec->id];
      GA_RETURN_IF_ERROR(NoDuplicateKeys(v, StrCat(" in health.checks.", name)));
      for (const auto& field : v) {
        const std::string key = field.first.IsScalar() ? field.first.Scalar() : "";
        const YAML::Node& fv = field.second;
        if (key == "severity") {
          std::optional<health::Severity> sev =
              fv.IsScalar() ? health::ParseSeveritySetting(fv.Scalar()) : std::nullopt;
          if (!sev) {
            return Error(fv, NotOneOf(StrCat("health.checks.", name, ".severity"), fv,
                                      {"unhealthy", "degraded", "ignore"}));
          }
          setting.severity = *sev;
        } else if (key == "threshold") {
          if (!spec->has_threshold) {
            return Error(field.first, StrCat("health.checks.", name,
                                             " takes no threshold (it fails on any occurrence)"));
          }
          double t = 0;
          if (!fv.IsScalar() || !ParseNumber(fv.Scalar(), &t) || t < spec->min_threshold ||
              t > spec->max_threshold) {
            return Error(fv, StrCat("health.checks.", name, ".threshold: ", Describe(fv),
                                    " is out of range; it is the ", spec->threshold_means,
                                    ", from ", FormatNumber(spec->min_threshold), " to ",
                                    FormatNumber(spec->max_threshold)));
          }
          setting.threshold = t;
        } else {
          return Error(field.first,
                       StrCat("unknown key \"", Printable(key, 60), "\" in health.checks.", name,
                              "; it takes severity and threshold"));
        }
      }
    }
    out_->origins["health.checks"] = Origin{ValueSource::kFile, Where(map)};
    return absl::OkStatus();
  }

  static bool ParseNumber(const std::string& text, double* out) {
    if (text.empty()) return false;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (errno != 0 || end != text.c_str() + text.size() || v != v) return false;
    *out = v;
    return true;
  }
  static std::string FormatNumber(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    return buf;
  }

  const std::string& filename_;
  LoadedConfig* out_;
};

}  // namespace

absl::Status ParseConfigYaml(std::string_view text, const std::string& filename,
                             LoadedConfig* out) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(
        StrCat(filename, ": not a YAML text file (a NUL byte at offset ", nul, ")"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        StrCat(filename, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  if (root.IsNull()) {
    // As NVIDIA's plugin (v0.12.2 and later) reads it: the defaults.
    out->notes.push_back(StrCat(filename, " is empty (or only comments): running with defaults"));
    return absl::OkStatus();
  }
  try {
    YamlWalker walker(filename, out);
    return walker.Walk(root);
  } catch (const YAML::Exception& e) {
    // Not expected (the walker checks node types first); kept so no
    // exception ever leaves the parser.
    return absl::InvalidArgumentError(
        StrCat(filename, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
}

}  // namespace gpu_agent
