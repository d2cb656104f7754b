#include "agent/cli/cli_flags.h"

#include <set>

#include "agent/config/config_schema.h"
#include "agent/config/nvidia_compat.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

constexpr const char* kGroupCommon = "Common";
constexpr const char* kGroupContainers = "Plugin and DRA modes: the CDI spec and device nodes";
constexpr const char* kGroupPlugin = "Plugin mode";
constexpr const char* kGroupDra = "DRA mode";
constexpr const char* kGroupApi = "Static and DRA modes: the node and the API server";
constexpr const char* kGroupStatic = "Static mode";
constexpr const char* kGroupIgnored = "NVIDIA compatibility (accepted, ignored)";

// As NVIDIA's command line (urfave/cli over Go's flag package) takes a flag
// given twice: a list flag accumulates, any other keeps the last value.
void ApplyGoRepeatRule(CLI::Option* opt, bool list) {
  if (list) {
    opt->delimiter(',')->multi_option_policy(CLI::MultiOptionPolicy::Join);
  } else {
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
}

// The help section of a setting in `run --help`: the modes that read it.
const char* GroupOf(std::string_view key) {
  if (key == "flags.gdsEnabled" || key == "flags.mofedEnabled") return kGroupIgnored;
  if (key == "flags.plugin.containerDriverRoot") return kGroupCommon;  // where NVML is loaded
  // What a container gets: both modes write it into CDI specs.
  if (key.starts_with("cdi.") || key == "procRoot" || key == "flags.nvidiaDevRoot" ||
      key == "flags.plugin.nvidiaCTKPath" || key == "flags.plugin.cdiDisableHooks") {
    return kGroupContainers;
  }
  if (key.starts_with("flags.plugin.") || key.starts_with("kubelet.")) return kGroupPlugin;
  if (key.starts_with("dra.")) return kGroupDra;
  if (key.starts_with("apiServer.") || key == "nodeName") return kGroupApi;
  if (key.starts_with("static.")) return kGroupStatic;
  return kGroupCommon;
}

std::string SettingHelp(const Setting& s, std::string* name) {
  std::string help(s.help);
  for (const SettingAlias& a : SettingAliases()) {
    if (a.key == s.key && !a.flag.empty()) {
      StrAppend(name, ",--", a.flag);
      StrAppend(&help, " (also --", a.flag, a.env.empty() ? "" : StrCat(", env ", a.env), ")");
    }
  }
  if (!s.env.empty()) StrAppend(&help, " (env ", s.env, ")");
  if (!s.choices.empty()) {
    StrAppend(&help, " [");
    for (size_t i = 0; i < s.choices.size(); ++i) {
      StrAppend(&help, i ? "|" : "", s.choices[i]);
    }
    StrAppend(&help, "]");
  }
  return help;
}

void AddSettingFlag(CLI::App* cmd, const Setting& s, const FlagSelection& sel, ConfigFlags* flags) {
  std::string name = StrCat("--", s.flag);
  if (sel.node_alias && s.key == "nodeName") StrAppend(&name, ",--node");
  const std::string help = SettingHelp(s, &name);
  std::string& target = flags->raw[std::string(s.key)];
  CLI::Option* opt = s.kind == SettingKind::kBool
                         ? cmd->add_flag(StrCat(name, "{true}"), target, help)
                         : cmd->add_option(name, target, help);
  if (s.key == "apiServer.proxy") {
    // --proxy alone means the kubectl proxy default address.
    opt->expected(0, 1)->default_str("http://127.0.0.1:8001");
  }
  ApplyGoRepeatRule(opt, s.kind == SettingKind::kStringList || s.kind == SettingKind::kIntList);
  if (sel.grouped) opt->group(GroupOf(s.key));
  flags->options[std::string(s.key)] = opt;
}

void AddIgnoredFlag(CLI::App* cmd, const IgnoredNvidiaFlag& f, const FlagSelection& sel,
                    ConfigFlags* flags) {
  const std::string name = StrCat("--", f.flag);
  std::string help = StrCat("ignored: ", f.reason, " (env ", f.env, ")");
  if (!f.choices.empty()) {
    std::vector<std::string> choices(f.choices.begin(), f.choices.end());
    StrAppend(&help, " [", StrJoin(choices, "|"), "]");
  }
  std::string& target = flags->ignored_raw[std::string(f.flag)];
  CLI::Option* opt = f.kind == IgnoredFlagKind::kBool
                         ? cmd->add_flag(StrCat(name, "{true}"), target, help)
                         : cmd->add_option(name, target, help);
  if (sel.grouped) opt->group(kGroupIgnored);
  ApplyGoRepeatRule(opt,
                    f.kind == IgnoredFlagKind::kIntList || f.kind == IgnoredFlagKind::kStringList);
  flags->ignored_options[std::string(f.flag)] = opt;
}

}  // namespace

void AddConfigFlags(CLI::App* cmd, ConfigFlags* flags, const FlagSelection& sel) {
  flags->config_option =
      cmd->add_option("--config,--config-file", flags->config_file,
                      "YAML config file (env CONFIG_FILE); NVIDIA device-plugin files load as is");
  if (sel.grouped) flags->config_option->group(kGroupCommon);
  // Grouped: one section after the other, so help lists each mode's flags together.
  const std::vector<const char*> groups =
      sel.grouped
          ? std::vector<const char*>{kGroupCommon, kGroupContainers, kGroupPlugin, kGroupDra,
                                     kGroupApi,    kGroupStatic,     kGroupIgnored}
          : std::vector<const char*>{nullptr};
  for (const char* group : groups) {
    for (const Setting& s : Settings()) {
      if (s.flag.empty()) continue;
      if (sel.applies && !sel.applies(s.key)) continue;
      if (group != nullptr && std::string_view(GroupOf(s.key)) != group) continue;
      AddSettingFlag(cmd, s, sel, flags);
    }
  }
  if (sel.nvidia_ignored) {
    for (const IgnoredNvidiaFlag& f : IgnoredNvidiaFlags()) AddIgnoredFlag(cmd, f, sel, flags);
  }
  // Mutually exclusive connection choices, caught at parse time.
  auto opt = [&](const char* key) -> CLI::Option* {
    auto it = flags->options.find(key);
    return it == flags->options.end() ? nullptr : it->second;
  };
  if (CLI::Option* proxy = opt("apiServer.proxy")) {
    for (const char* other : {"apiServer.server", "apiServer.kubeconfig", "apiServer.context"}) {
      if (CLI::Option* o = opt(other)) proxy->excludes(o);
    }
  }
  if (CLI::Option* insecure = opt("apiServer.insecureSkipTLSVerify")) {
    if (CLI::Option* ca = opt("apiServer.certificateAuthority")) insecure->excludes(ca);
  }
}

std::function<bool(std::string_view)> CapacityApplies(const std::string& verb) {
  return [verb](std::string_view key) {
    // The node and the resource come from --node and --resource (or the
    // config file and NODE_NAME), not from --node-name or --resource-name.
    if (key.starts_with("apiServer.") || key.starts_with("log.")) return true;
    if (verb != "set") return false;
    return key == "static.allocatable" || key == "flags.migStrategy" ||
           key.starts_with("devices.") || key == "flags.nvidiaDriverRoot" ||
           key == "flags.plugin.containerDriverRoot" || key == "sysfsRoot";
  };
}

void AcceptSingleDashLongFlags(const CLI::App& app, std::vector<std::string>* args) {
  std::set<std::string> long_names;
  std::function<void(const CLI::App&)> collect = [&](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options()) {
      for (const std::string& n : o->get_lnames()) long_names.insert(n);
    }
    for (const CLI::App* sub : a.get_subcommands({})) collect(*sub);
  };
  collect(app);
  for (size_t i = 1; i < args->size(); ++i) {
    std::string& a = (*args)[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-' || a[1] == '-') continue;
    const std::string name =
        a.substr(1, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 1);
    if (name.size() > 1 && long_names.count(name) > 0) a.insert(0, "-");
  }
}

namespace {

// Where NVML is loaded from and which GPUs are chosen: what every command
// that discovers GPUs reads.
bool DiscoveryKey(std::string_view key) {
  return key == "flags.nvidiaDriverRoot" || key == "flags.plugin.containerDriverRoot" ||
         key == "sysfsRoot" || key.starts_with("devices.") || key.starts_with("log.");
}

}  // namespace

std::function<bool(std::string_view)> DevicesApplies() { return DiscoveryKey; }

std::function<bool(std::string_view)> CdiGenerateApplies() {
  return [](std::string_view key) {
    return DiscoveryKey(key) || key.starts_with("cdi.") || key == "flags.nvidiaDevRoot" ||
           key == "flags.migStrategy" || key == "procRoot" || key == "flags.plugin.nvidiaCTKPath" ||
           key == "flags.plugin.cdiDisableHooks";
  };
}

std::function<bool(std::string_view)> DraSlicesApplies() {
  return [](std::string_view key) {
    return DiscoveryKey(key) || key == "flags.migStrategy" || key == "nodeName" ||
           key == "dra.driverName";
  };
}

std::function<bool(std::string_view)> LabelsApplies(const std::string& verb) {
  return [verb](std::string_view key) {
    if (key.starts_with("apiServer.") || key == "nodeName") return verb != "print";
    return DiscoveryKey(key) || key == "resourceName" || key == "flags.migStrategy" ||
           key.starts_with("sharing.") || key == "flags.plugin.sharedDevicesAllocationPolicy";
  };
}

ConfigRequest BuildRequest(const ConfigFlags& flags) {
  ConfigRequest req;
  if (flags.config_option->count() > 0) {
    req.file = flags.config_file;
    req.file_origin = "flag --config";
  } else if (auto env = req.env("CONFIG_FILE"); env && !env->empty()) {
    req.file = *env;
    req.file_origin = "env CONFIG_FILE";
  }
  for (const auto& [key_or_alias, opt] : flags.options) {
    if (opt->count() == 0) continue;
    const std::string key = key_or_alias.substr(0, key_or_alias.find('#'));
    std::string value = flags.raw.at(key);
    if (key == "apiServer.proxy" && value.empty()) value = "http://127.0.0.1:8001";
    req.flags.emplace_back(key, value);
  }
  for (const auto& [flag, opt] : flags.ignored_options) {
    if (opt->count() > 0) req.ignored_flags.emplace_back(flag, flags.ignored_raw.at(flag));
  }
  return req;
}

}  // namespace gpu_agent
