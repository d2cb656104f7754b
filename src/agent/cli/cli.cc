#include "agent/cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "agent/cli/capacity_command.h"
#include "agent/cli/cdi_command.h"
#include "agent/cli/cli_flags.h"
#include "agent/config/config_schema.h"
#include "agent/config/nvidia_compat.h"
#include "base/exit_code.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/text.h"
#include "base/version.h"
#include "deviceplugin/library_logs.h"

namespace gpu_agent {
namespace {

// The flags of a command that only reads: those `applies` names, without
// NVIDIA's flags that `run` accepts and ignores.
FlagSelection OnlyFlags(std::function<bool(std::string_view)> applies) {
  FlagSelection sel;
  sel.applies = std::move(applies);
  sel.nvidia_ignored = false;
  return sel;
}

// Applies the log settings of a loaded config (stderr, level, format).
void ApplyLogging(const Config& c) {
  SetLogOptions(ParseLogLevel(c.log.level).value_or(LogLevel::kInfo),
                ParseLogFormat(c.log.format).value_or(LogFormat::kText));
}

absl::StatusOr<LoadedConfig> Load(const ConfigRequest& req) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfig(req);
  if (loaded.ok()) ApplyLogging(loaded->config);
  return loaded;
}

int ReportConfigError(const absl::Status& s) {
  std::fprintf(stderr, "gpu-agent: config error: %s\n", std::string(s.message()).c_str());
  return kExitUsage;
}

enum class Invocation { kSubcommand, kImpliedRun, kNvidiaName, kVersion };

// NVIDIA's plugin has no subcommands: its flags alone, or none, run it, and
// `--version` prints the version. So gpu-agent runs `run` when it is started
// under NVIDIA's program name, with no arguments, or with a flag first (but
// not a help flag, which still shows the subcommands). Rewrites `args`.
Invocation ResolveInvocation(std::vector<std::string>* args) {
  std::string_view program = (*args)[0];
  if (size_t slash = program.rfind('/'); slash != std::string_view::npos) {
    program.remove_prefix(slash + 1);
  }
  const bool nvidia_name = program == kNvidiaPluginProgram;
  if (args->size() == 2 && ((*args)[1] == "--version" || (nvidia_name && (*args)[1] == "-v"))) {
    return Invocation::kVersion;
  }
  if (nvidia_name) {
    args->insert(args->begin() + 1, "run");
    return Invocation::kNvidiaName;
  }
  if (args->size() == 1) {
    args->push_back("run");
    return Invocation::kImpliedRun;
  }
  const std::string& first = (*args)[1];
  if (first.size() > 1 && first[0] == '-' && first != "-h" && first != "--help" &&
      first != "--help-all") {
    args->insert(args->begin() + 1, "run");
    return Invocation::kImpliedRun;
  }
  return Invocation::kSubcommand;
}

}  // namespace

int RunCli(int argc, char** argv, const CliCommands& commands) {
  deviceplugin::RouteLibraryLogs();
  std::vector<std::string> args(argv, argv + argc);
  if (args.empty()) args.push_back("gpu-agent");
  const Invocation how = ResolveInvocation(&args);
  if (how == Invocation::kVersion) {
    std::printf("gpu-agent %s\n", kVersion);
    return kExitOk;
  }

  CLI::App app(
      "gpu-agent makes a node's NVIDIA GPUs schedulable in Kubernetes: as a kubelet device "
      "plugin (plugin mode) or by writing Node capacity (static mode). Flags without a "
      "subcommand (or none at all) run the agent, as NVIDIA's nvidia-device-plugin does.",
      "gpu-agent");
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");

  CLI::App* run = app.add_subcommand("run", "run the agent (mode from the config or --mode)");
  ConfigFlags run_flags;
  FlagSelection run_selection;
  run_selection.grouped = true;
  run_selection.node_alias = true;
  AddConfigFlags(run, &run_flags, run_selection);

  CLI::App* devices = app.add_subcommand(
      "devices", "list the GPUs NVML reports, and which of them devices.* selects");
  ConfigFlags devices_flags;
  AddConfigFlags(devices, &devices_flags, OnlyFlags(DevicesApplies()));
  std::string output = "table";
  devices->add_option("-o,--output", output, "output format")
      ->check(CLI::IsMember({"table", "json", "yaml"}));

  CLI::App* health = app.add_subcommand(
      "health",
      "poll every health check (memory, thermal, NVLink, PCIe, recovery action) on every GPU "
      "once and print each check's state and NVML's raw answers; exit 0 whatever the GPUs' "
      "health");
  ConfigFlags health_flags;
  AddConfigFlags(health, &health_flags, OnlyFlags(DevicesApplies()));
  std::string health_output = "text";
  health->add_option("-o,--output", health_output, "output format")
      ->check(CLI::IsMember({"text", "json", "yaml"}));

  CLI::App* config =
      app.add_subcommand("config", "print the effective config and where each value came from");
  ConfigFlags config_flags;
  AddConfigFlags(config, &config_flags);
  bool config_strict = false;
  config->add_flag("--strict", config_strict,
                   "refuse unknown keys in the config file (which run warns about and skips), "
                   "for linting ConfigMaps in CI");
  ConfigCommandOptions config_options;
  config->add_flag("--plan", config_options.plan,
                   "print what run would advertise per resource (devices, health, replicas, "
                   "IDs, socket, CDI devices) instead of the config");
  config->add_option("-o,--output", config_options.output, "--plan's format (default text)")
      ->check(CLI::IsMember({"text", "json", "yaml"}));

  CLI::App* cdi = app.add_subcommand("cdi", "Container Device Interface spec for this node");
  cdi->require_subcommand(1);
  CLI::App* cdi_generate = cdi->add_subcommand(
      "generate", "print the CDI spec of this node's GPUs (or write it with --output-file)");
  ConfigFlags cdi_flags;
  AddConfigFlags(cdi_generate, &cdi_flags, OnlyFlags(CdiGenerateApplies()));
  std::string cdi_format;
  std::string cdi_output;
  // -o/--output is the format, as in every other subcommand; a file is
  // --output-file (-f). A path given to --output is named as the mistake.
  cdi_generate
      ->add_option("-o,--output,--format", cdi_format,
                   "spec format (default: from --output-file's extension, else yaml)")
      ->check(
          [](const std::string& v) -> std::string {
            if (v == "json" || v == "yaml") return "";
            return StrCat("--output is the format (json or yaml), not \"", v,
                          "\"; write the spec to a file with --output-file ", v);
          },
          "json|yaml");
  cdi_generate->add_option("-f,--output-file", cdi_output,
                           "write the spec to this file atomically instead of printing it");

  CLI::App* dra = app.add_subcommand("dra", "Dynamic Resource Allocation (DRA mode)");
  dra->require_subcommand(1);
  CLI::App* dra_slices = dra->add_subcommand(
      "slices", "print the ResourceSlices DRA mode would publish for this node's GPUs");
  ConfigFlags dra_flags;
  AddConfigFlags(dra_slices, &dra_flags, OnlyFlags(DraSlicesApplies()));
  std::string dra_output = "yaml";
  dra_slices->add_option("-o,--output", dra_output, "output format")
      ->check(CLI::IsMember({"json", "yaml"}));

  CLI::App* version = app.add_subcommand("version", "print the version");

  CLI::App* capacity = app.add_subcommand(
      "capacity", "read or patch a Node's GPU capacity through the API server or kubectl proxy");
  capacity->require_subcommand(1);
  struct CapacityCli {
    CLI::App* cmd;
    ConfigFlags flags;
    CapacityRequest req;
    std::string count;
    CLI::Option* count_opt = nullptr;
  };
  std::vector<std::unique_ptr<CapacityCli>> capacity_cmds;
  for (const char* verb : {"set", "get", "remove"}) {
    auto c = std::make_unique<CapacityCli>();
    c->req.verb = verb;
    c->cmd = capacity->add_subcommand(
        verb, std::string(verb) == "set"   ? "set the resource in status.capacity (and allocatable)"
              : std::string(verb) == "get" ? "print the resource's capacity and allocatable"
                                           : "remove the resource from the Node");
    FlagSelection selection;
    selection.applies = CapacityApplies(c->req.verb);
    selection.nvidia_ignored = false;
    AddConfigFlags(c->cmd, &c->flags, selection);
    c->cmd->add_option("--node", c->req.node, "the Node (default: NODE_NAME)");
    c->cmd->add_option("--resource", c->req.resource,
                       "the extended resource (default: resourceName, nvidia.com/gpu)");
    c->cmd->add_flag("--dry-run", c->req.dry_run,
                     "print the request (Authorization redacted) instead of sending it");
    if (c->req.verb == "set") {
      c->count_opt = c->cmd->add_option("--count", c->count, "the number to advertise");
      auto* discover = c->cmd->add_flag("--discover", c->req.discover,
                                        "advertise the healthy GPUs NVML sees (x replicas)");
      c->count_opt->excludes(discover);
    }
    if (c->req.verb == "get") {
      c->cmd->add_option("-o,--output", c->req.output, "output format")
          ->check(CLI::IsMember({"text", "json"}));
    }
    capacity_cmds.push_back(std::move(c));
  }

  CLI::App* labels = app.add_subcommand(
      "labels", "print the GPU labels (gpu-feature-discovery's keys) this node's GPUs call for");
  ConfigFlags labels_flags;
  FlagSelection labels_selection;  // the GPUs' settings (and the connection), not NVIDIA's no-ops
  labels_selection.nvidia_ignored = false;
  labels_selection.applies = LabelsApplies("print");
  AddConfigFlags(labels, &labels_flags, labels_selection);
  LabelsRequest labels_req;
  labels->add_option("-o,--output", labels_req.output, "output format")
      ->check(CLI::IsMember({"text", "json", "yaml"}));
  struct LabelsCli {
    CLI::App* cmd;
    ConfigFlags flags;
    LabelsRequest req;
  };
  std::vector<std::unique_ptr<LabelsCli>> labels_cmds;
  for (const char* verb : {"apply", "remove"}) {
    auto c = std::make_unique<LabelsCli>();
    c->req.verb = verb;
    c->cmd = labels->add_subcommand(
        verb, std::string(verb) == "apply"
                  ? "put the labels on the Node (one PATCH of nodes/status), removing the "
                    "agent's stale ones"
                  : "remove the labels the agent put on the Node, and no other");
    FlagSelection verb_selection = labels_selection;
    verb_selection.applies = LabelsApplies(verb);
    AddConfigFlags(c->cmd, &c->flags, verb_selection);
    c->cmd->add_option("--node", c->req.node, "the Node (default: NODE_NAME)");
    c->cmd->add_flag("--dry-run", c->req.dry_run,
                     "read the Node, print the PATCH (Authorization redacted), send nothing");
    labels_cmds.push_back(std::move(c));
  }

  if (args.size() > 1 && args[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), args[1]) == names.end()) {
      std::string msg = StrCat("gpu-agent: unknown subcommand \"", args[1], "\" (one of ",
                               StrJoin(names, ", "), ")");
      if (std::string near = ClosestMatch(args[1], names); !near.empty()) {
        StrAppend(&msg, "; did you mean \"", near, "\"?");
      }
      std::fprintf(stderr, "%s\n", msg.c_str());
      return kExitUsage;
    }
  }
  AcceptSingleDashLongFlags(app, &args);
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  if (version->parsed()) {
    std::printf("gpu-agent %s\n", kVersion);
    return kExitOk;
  }
  if (devices->parsed()) {
    ConfigRequest req = BuildRequest(devices_flags);
    absl::StatusOr<LoadedConfig> loaded = Load(req);
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.devices(*loaded, output);
  }
  if (health->parsed()) {
    absl::StatusOr<LoadedConfig> loaded = Load(BuildRequest(health_flags));
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.health(*loaded, health_output);
  }
  for (auto& c : capacity_cmds) {
    if (!c->cmd->parsed()) continue;
    if (c->count_opt != nullptr && c->count_opt->count() > 0) c->req.count = c->count;
    ConfigRequest req = BuildRequest(c->flags);
    absl::StatusOr<LoadedConfig> loaded = Load(req);
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.capacity(*loaded, c->req);
  }
  for (auto& c : labels_cmds) {
    if (!c->cmd->parsed()) continue;
    absl::StatusOr<LoadedConfig> loaded = Load(BuildRequest(c->flags));
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.labels(*loaded, c->req);
  }
  if (labels->parsed()) {
    absl::StatusOr<LoadedConfig> loaded = Load(BuildRequest(labels_flags));
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.labels(*loaded, labels_req);
  }
  if (dra_slices->parsed()) {
    absl::StatusOr<LoadedConfig> loaded = Load(BuildRequest(dra_flags));
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.dra_slices(*loaded, dra_output);
  }
  if (cdi_generate->parsed()) {
    ConfigRequest req = BuildRequest(cdi_flags);
    absl::StatusOr<LoadedConfig> loaded = Load(req);
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.cdi_generate(*loaded, cdi_format, cdi_output);
  }
  if (config->parsed()) {
    ConfigRequest req = BuildRequest(config_flags);
    req.strict = config_strict;
    absl::StatusOr<LoadedConfig> loaded = Load(req);
    if (!loaded.ok()) return ReportConfigError(loaded.status());
    return commands.config(*loaded, config_options);
  }
  ConfigRequest req = BuildRequest(run_flags);
  absl::StatusOr<LoadedConfig> loaded = Load(req);
  if (!loaded.ok()) return ReportConfigError(loaded.status());
  if (how == Invocation::kImpliedRun) {
    loaded->notes.insert(loaded->notes.begin(),
                         "no subcommand given: running the agent as `gpu-agent run` would "
                         "(`gpu-agent --help` lists the subcommands)");
  } else if (how == Invocation::kNvidiaName) {
    loaded->notes.insert(loaded->notes.begin(),
                         StrCat("started as ", kNvidiaPluginProgram,
                                ": running the agent as `gpu-agent run` would"));
  }
  return commands.run(req, *std::move(loaded));
}

}  // namespace gpu_agent
