#include "agent/config/node_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "base/log.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

namespace fs = std::filesystem;

constexpr const char* kYaml = ".yaml";

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A label's name part, or a label value: at most 63 characters of
// [A-Za-z0-9._-], starting and ending alphanumeric.
bool IsLabelName(const std::string& s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

// A DNS subdomain: lower-case alphanumerics, '-' and '.', at most 253.
bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (IsAlnum(c) && !std::isupper(static_cast<unsigned char>(c))) || c == '-' || c == '.';
  });
}

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows the symlinks a ConfigMap volume is made of
}

std::string Shown(const std::optional<std::string>& value) {
  return value ? Printable(*value, 80) : "(no label)";
}

std::string OriginOf(const LoadedConfig& c, const std::string& key) {
  auto it = c.origins.find(key);
  return it == c.origins.end() ? "" : StrCat(it->second.detail, ": ");
}

}  // namespace

absl::Status ValidateConfigName(const std::string& name) {
  if (IsLabelName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("\"", Printable(name, 80),
             "\" is not a config name: a name is what a label value may hold, at most 63 "
             "characters of letters, digits, '.', '_' and '-', starting and ending with a letter "
             "or digit"));
}

absl::Status ValidateNodeConfigSettings(const Config& c) {
  const Config::NodeConfig& n = c.node_config;
  const size_t slash = n.label.rfind('/');
  const std::string prefix = slash == std::string::npos ? "" : n.label.substr(0, slash);
  const std::string name = slash == std::string::npos ? n.label : n.label.substr(slash + 1);
  if (!IsLabelName(name) || (slash != std::string::npos && !IsDnsSubdomain(prefix))) {
    return absl::InvalidArgumentError(StrCat(
        "nodeConfig.label: \"", Printable(n.label, 80),
        "\" is not a label key (an optional DNS-subdomain prefix and '/', then at most 63 "
        "characters of letters, digits, '.', '_' and '-'), e.g. nvidia.com/device-plugin.config"));
  }
  if (!n.default_name.empty()) {
    if (absl::Status s = ValidateConfigName(n.default_name); !s.ok()) {
      return absl::InvalidArgumentError(StrCat("nodeConfig.default: ", s.message()));
    }
  }
  if (!n.dir.empty() && c.node_name.empty()) {
    return absl::InvalidArgumentError(
        "nodeConfig.dir: a config chosen by a node label needs this node's name: set nodeName, "
        "--node-name or NODE_NAME (in a pod, from the downward API: spec.nodeName)");
  }
  return absl::OkStatus();
}

std::vector<std::string> NamedConfigs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name.front() == '.' || !IsFile(it->path())) continue;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, kYaml) == 0)
      name.resize(name.size() - 5);
    out.push_back(std::move(name));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<std::string> FindNamedConfig(const std::string& dir, const std::string& name) {
  if (absl::Status s = ValidateConfigName(name); !s.ok()) return s;
  for (const std::string& file : {name, StrCat(name, kYaml)}) {
    const fs::path p = fs::path(dir) / file;
    if (IsFile(p)) return p.string();
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(StrCat("the folder \"", dir, "\" is not there"));
  }
  const std::vector<std::string> names = NamedConfigs(dir);
  return absl::NotFoundError(StrCat("no config named \"", name, "\" (no file ", name, " or ", name,
                                    kYaml, ") in \"", dir, "\"; it holds ",
                                    names.empty() ? "none" : StrJoin(names, ", ")));
}

absl::StatusOr<std::unique_ptr<NodeConfigSelector>> NodeConfigSelector::Create(
    const LoadedConfig& started) {
  const Config::NodeConfig& n = started.config.node_config;
  std::error_code ec;
  if (!fs::is_directory(n.dir, ec)) {
    return absl::InvalidArgumentError(StrCat(
        OriginOf(started, "nodeConfig.dir"), "nodeConfig.dir: \"", n.dir, "\" is not a folder (",
        ec ? ec.message() : "no such folder", "); mount the ConfigMap of named configs there"));
  }
  if (!n.default_name.empty()) {
    if (absl::StatusOr<std::string> f = FindNamedConfig(n.dir, n.default_name); !f.ok()) {
      return absl::InvalidArgumentError(StrCat(OriginOf(started, "nodeConfig.default"),
                                               "nodeConfig.default: ", f.status().message()));
    }
  }
  return std::unique_ptr<NodeConfigSelector>(new NodeConfigSelector(n));
}

void NodeConfigSelector::SetInitialLabel(std::optional<std::string> value) {
  std::lock_guard<std::mutex> lock(mu_);
  label_known_ = true;
  label_ = std::move(value);
}

std::string NodeConfigSelector::NameFor(const std::optional<std::string>& value) const {
  if (value && !value->empty()) return *value;
  return settings_.default_name;
}

absl::StatusOr<LoadedConfig> NodeConfigSelector::LoadNamed(const ConfigRequest& request,
                                                           const LoadedConfig& base,
                                                           const std::string& name,
                                                           const std::string& source) {
  absl::StatusOr<std::string> path = FindNamedConfig(settings_.dir, name);
  if (!path.ok()) return path.status();
  ConfigRequest named = request;
  named.file = *path;
  named.file_origin =
      source == "label" ? StrCat("node label ", settings_.label, "=", name) : "nodeConfig.default";
  absl::StatusOr<LoadedConfig> loaded = LoadConfig(named);
  if (!loaded.ok()) return loaded.status();
  // nodeConfig.* are the agent's start-time settings, not a named config's.
  if (loaded->config.node_config.dir != base.config.node_config.dir ||
      loaded->config.node_config.label != base.config.node_config.label ||
      loaded->config.node_config.default_name != base.config.node_config.default_name) {
    loaded->notes.push_back(StrCat(*path, ": nodeConfig.* in a named config has no effect"));
  }
  loaded->config.node_config = base.config.node_config;
  for (const char* key : {"nodeConfig.dir", "nodeConfig.label", "nodeConfig.default"}) {
    loaded->origins.erase(key);
    if (auto it = base.origins.find(key); it != base.origins.end()) loaded->origins.insert(*it);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ = name;
    in_use_source_ = source;
  }
  LogInfo("node config in use", {{"name", name}, {"file", *path}, {"chosen_by", source}});
  return loaded;
}

absl::StatusOr<LoadedConfig> NodeConfigSelector::Load(const ConfigRequest& request, bool at_start) {
  absl::StatusOr<LoadedConfig> base = LoadConfig(request);
  if (!base.ok()) return base.status();
  std::optional<std::string> label;
  {
    std::lock_guard<std::mutex> lock(mu_);
    label = label_;
  }
  const std::string name = NameFor(label);
  auto use_base = [&]() -> absl::StatusOr<LoadedConfig> {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_.clear();
    in_use_source_ = "config";
    return base;
  };
  if (name.empty()) return use_base();
  const std::string source = label && !label->empty() ? "label" : "default";
  absl::StatusOr<LoadedConfig> named = LoadNamed(request, *base, name, source);
  if (named.ok()) return named;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++errors_;
  }
  LogError(at_start ? "the node's named config cannot be used"
                    : "the node's named config cannot be used; keeping the running config",
           {{"label", settings_.label},
            {"value", Shown(label)},
            {"config", name},
            {"dir", settings_.dir},
            {"error", std::string(named.status().message())}});
  if (!at_start) return named.status();
  if (source == "label" && !settings_.default_name.empty() && settings_.default_name != name) {
    absl::StatusOr<LoadedConfig> fallback =
        LoadNamed(request, *base, settings_.default_name, "default");
    if (fallback.ok()) {
      LogWarning("starting with the default named config instead",
                 {{"config", settings_.default_name}});
      return fallback;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++errors_;
    }
    LogError("the default named config cannot be used either",
             {{"config", settings_.default_name},
              {"dir", settings_.dir},
              {"error", std::string(fallback.status().message())}});
  }
  LogWarning("starting with the config of the --config file, env and flags instead");
  return use_base();
}

bool NodeConfigSelector::Observe(const std::optional<std::string>& value) {
  std::optional<std::string> before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (label_known_ && label_ == value) return false;
    const bool was_known = label_known_;
    before = label_;
    label_known_ = true;
    label_ = value;
    if (!was_known && NameFor(value) == in_use_) return false;
    ++label_reloads_;
  }
  LogInfo("the node's config label changed; reloading as on SIGHUP",
          {{"label", settings_.label}, {"from", Shown(before)}, {"to", Shown(value)}});
  return true;
}

void NodeConfigSelector::RenderMetrics(PromText* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  p->Family("gpu_agent_node_config_info", "gauge",
            "The named config in use (source: label, default, or config for the --config file).");
  p->Sample("gpu_agent_node_config_info", {{"name", in_use_}, {"source", in_use_source_}}, 1);
  p->Family("gpu_agent_node_config_errors_total", "counter",
            "Named configs that could not be used (missing or broken); the running one stayed.");
  p->Sample("gpu_agent_node_config_errors_total", {}, static_cast<double>(errors_));
  p->Family("gpu_agent_node_config_label_changes_total", "counter",
            "Changes of the node's config label, each reloaded as on SIGHUP.");
  p->Sample("gpu_agent_node_config_label_changes_total", {}, static_cast<double>(label_reloads_));
}

}  // namespace gpu_agent
