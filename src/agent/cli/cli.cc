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

// What one subcommand's flags and options are bound to (each subcommand
// has its own; a field only some of them use stays as it is for the rest).
struct Bound {
  ConfigFlags flags;
  std::string output;
  std::string output_file;  // cdi generate --output-file
  bool strict = false;      // config --strict
  ConfigCommandOptions config;
  CapacityRequest capacity;
  std::string count;                 // capacity set --count
  CLI::Option* count_opt = nullptr;  // null once the parser is gone
  bool count_given = false;          // --count was on the command line
  LabelsRequest labels;
  Invocation how = Invocation::kSubcommand;  // run: how it was asked for
};

// One subcommand: its path ("cdi generate"), its help, how its flags are
// added, and what it runs once parsed (with the config loaded unless
// `loads_config` is false). A group (`run` null) requires one of the
// subcommands after it; `labels` both runs and has subcommands.
struct Subcommand {
  std::string path;
  std::string help;
  std::function<void(CLI::App*, Bound*)> setup;
  std::function<int(const CliCommands&, Bound&, const ConfigRequest&, LoadedConfig)> run;
  bool loads_config = true;
};

// -o/--output, one of `formats`, into `*output`.
void AddOutput(CLI::App* app, std::string* output, std::vector<std::string> formats,
               const std::string& help = "output format") {
  app->add_option("-o,--output", *output, help)->check(CLI::IsMember(std::move(formats)));
}

void SetupRun(CLI::App* app, Bound* b) {
  FlagSelection selection;
  selection.grouped = true;
  selection.node_alias = true;
  AddConfigFlags(app, &b->flags, selection);
}

void SetupConfig(CLI::App* app, Bound* b) {
  AddConfigFlags(app, &b->flags);
  app->add_flag("--strict", b->strict,
                "refuse unknown keys in the config file (which run warns about and skips), "
                "for linting ConfigMaps in CI");
  app->add_flag("--plan", b->config.plan,
                "print what run would advertise per resource (devices, health, replicas, "
                "IDs, socket, CDI devices) instead of the config");
  AddOutput(app, &b->config.output, {"text", "json", "yaml"}, "--plan's format (default text)");
}

void SetupCdiGenerate(CLI::App* app, Bound* b) {
  AddConfigFlags(app, &b->flags, OnlyFlags(CdiGenerateApplies()));
  // -o/--output is the format, as in every other subcommand; a file is
  // --output-file (-f). A path given to --output is named as the mistake.
  app->add_option("-o,--output,--format", b->output,
                  "spec format (default: from --output-file's extension, else yaml)")
      ->check(
          [](const std::string& v) -> std::string {
            if (v == "json" || v == "yaml") return "";
            return StrCat("--output is the format (json or yaml), not \"", v,
                          "\"; write the spec to a file with --output-file ", v);
          },
          "json|yaml");
  app->add_option("-f,--output-file", b->output_file,
                  "write the spec to this file atomically instead of printing it");
}

// capacity set, get or remove.
Subcommand Capacity(const std::string& verb, std::string help) {
  auto setup = [verb](CLI::App* app, Bound* b) {
    b->capacity.verb = verb;
    FlagSelection selection;
    selection.applies = CapacityApplies(verb);
    selection.nvidia_ignored = false;
    AddConfigFlags(app, &b->flags, selection);
    app->add_option("--node", b->capacity.node, "the Node (default: NODE_NAME)");
    app->add_option("--resource", b->capacity.resource,
                    "the extended resource (default: resourceName, nvidia.com/gpu)");
    app->add_flag("--dry-run", b->capacity.dry_run,
                  "print the request (Authorization redacted) instead of sending it");
    if (verb == "set") {
      b->count_opt = app->add_option("--count", b->count, "the number to advertise");
      auto* discover = app->add_flag("--discover", b->capacity.discover,
                                     "advertise the healthy GPUs NVML sees (x replicas)");
      b->count_opt->excludes(discover);
    }
    if (verb == "get") AddOutput(app, &b->capacity.output, {"text", "json"});
  };
  auto run = [](const CliCommands& c, Bound& b, const ConfigRequest&, LoadedConfig loaded) {
    if (b.count_given) b.capacity.count = b.count;
    return c.capacity(loaded, b.capacity);
  };
  return {"capacity " + verb, std::move(help), setup, run};
}

// labels (print), apply or remove: the GPUs' settings and the connection,
// not NVIDIA's no-ops.
Subcommand Labels(const std::string& verb, std::string path, std::string help) {
  auto setup = [verb](CLI::App* app, Bound* b) {
    if (verb != "print") b->labels.verb = verb;  // empty: print
    FlagSelection selection;
    selection.nvidia_ignored = false;
    selection.applies = LabelsApplies(verb);
    AddConfigFlags(app, &b->flags, selection);
    if (verb == "print") {
      AddOutput(app, &b->labels.output, {"text", "json", "yaml"});
      return;
    }
    app->add_option("--node", b->labels.node, "the Node (default: NODE_NAME)");
    app->add_flag("--dry-run", b->labels.dry_run,
                  "read the Node, print the PATCH (Authorization redacted), send nothing");
  };
  auto run = [](const CliCommands& c, Bound& b, const ConfigRequest&, LoadedConfig loaded) {
    return c.labels(loaded, b.labels);
  };
  return {std::move(path), std::move(help), setup, run};
}

int RunAgent(const CliCommands& c, Bound& b, const ConfigRequest& req, LoadedConfig loaded) {
  if (b.how == Invocation::kImpliedRun) {
    loaded.notes.insert(loaded.notes.begin(),
                        "no subcommand given: running the agent as `gpu-agent run` would "
                        "(`gpu-agent --help` lists the subcommands)");
  } else if (b.how == Invocation::kNvidiaName) {
    loaded.notes.insert(loaded.notes.begin(),
                        StrCat("started as ", kNvidiaPluginProgram,
                               ": running the agent as `gpu-agent run` would"));
  }
  return c.run(req, std::move(loaded));
}

// Every subcommand, in the order help lists them; a group before its own.
std::vector<Subcommand> Subcommands() {
  using L = LoadedConfig;
  using R = ConfigRequest;
  using C = CliCommands;
  std::vector<Subcommand> out;
  out.push_back({"run", "run the agent (mode from the config or --mode)", SetupRun, RunAgent});
  out.push_back({"devices", "list the GPUs NVML reports, and which of them devices.* selects",
                 [](CLI::App* app, Bound* b) {
                   AddConfigFlags(app, &b->flags, OnlyFlags(DevicesApplies()));
                   b->output = "table";
                   AddOutput(app, &b->output, {"table", "json", "yaml"});
                 },
                 [](const C& c, Bound& b, const R&, L l) { return c.devices(l, b.output); }});
  out.push_back({"health",
                 "poll every health check (memory, thermal, NVLink, PCIe, recovery action) on "
                 "every GPU once and print each check's state and NVML's raw answers; exit 0 "
                 "whatever the GPUs' health",
                 [](CLI::App* app, Bound* b) {
                   AddConfigFlags(app, &b->flags, OnlyFlags(DevicesApplies()));
                   b->output = "text";
                   AddOutput(app, &b->output, {"text", "json", "yaml"});
                 },
                 [](const C& c, Bound& b, const R&, L l) { return c.health(l, b.output); }});
  out.push_back({"config", "print the effective config and where each value came from", SetupConfig,
                 [](const C& c, Bound& b, const R&, L l) { return c.config(l, b.config); }});
  out.push_back({"cdi", "Container Device Interface spec for this node", nullptr, nullptr});
  out.push_back({"cdi generate",
                 "print the CDI spec of this node's GPUs (or write it with --output-file)",
                 SetupCdiGenerate, [](const C& c, Bound& b, const R&, L l) {
                   return c.cdi_generate(l, b.output, b.output_file);
                 }});
  out.push_back({"dra", "Dynamic Resource Allocation (DRA mode)", nullptr, nullptr});
  out.push_back({"dra slices",
                 "print the ResourceSlices DRA mode would publish for this node's GPUs",
                 [](CLI::App* app, Bound* b) {
                   AddConfigFlags(app, &b->flags, OnlyFlags(DraSlicesApplies()));
                   b->output = "yaml";
                   AddOutput(app, &b->output, {"json", "yaml"});
                 },
                 [](const C& c, Bound& b, const R&, L l) { return c.dra_slices(l, b.output); }});
  out.push_back({"version", "print the version", nullptr,
                 [](const C&, Bound&, const R&, L) {
                   std::printf("gpu-agent %s\n", kVersion);
                   return kExitOk;
                 },
                 false});
  out.push_back({"capacity",
                 "read or patch a Node's GPU capacity through the API server or kubectl proxy",
                 nullptr, nullptr});
  out.push_back(Capacity("set", "set the resource in status.capacity (and allocatable)"));
  out.push_back(Capacity("get", "print the resource's capacity and allocatable"));
  out.push_back(Capacity("remove", "remove the resource from the Node"));
  out.push_back(
      Labels("print", "labels",
             "print the GPU labels (gpu-feature-discovery's keys) this node's GPUs call for"));
  out.push_back(Labels("apply", "labels apply",
                       "put the labels on the Node (one PATCH of nodes/status), removing the "
                       "agent's stale ones"));
  out.push_back(Labels("remove", "labels remove",
                       "remove the labels the agent put on the Node, and no other"));
  return out;
}

// The subcommands added to `app`, each bound to its own Bound.
std::vector<CLI::App*> AddSubcommands(CLI::App& app, const std::vector<Subcommand>& table,
                                      std::vector<std::unique_ptr<Bound>>* bound) {
  std::map<std::string, CLI::App*> by_path;
  std::vector<CLI::App*> apps;
  for (const Subcommand& s : table) {
    const size_t space = s.path.rfind(' ');
    CLI::App* parent = space == std::string::npos ? &app : by_path.at(s.path.substr(0, space));
    CLI::App* sub = parent->add_subcommand(
        space == std::string::npos ? s.path : s.path.substr(space + 1), s.help);
    if (s.run == nullptr) sub->require_subcommand(1);
    bound->push_back(std::make_unique<Bound>());
    if (s.setup) s.setup(sub, bound->back().get());
    by_path[s.path] = sub;
    apps.push_back(sub);
  }
  return apps;
}

// A first argument that names no subcommand, said with the nearest name;
// empty when it names one (or is a flag).
std::string UnknownSubcommand(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.size() < 2 || args[1][0] == '-') return "";
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), args[1]) != names.end()) return "";
  std::string msg =
      StrCat("gpu-agent: unknown subcommand \"", args[1], "\" (one of ", StrJoin(names, ", "), ")");
  if (std::string near = ClosestMatch(args[1], names); !near.empty()) {
    StrAppend(&msg, "; did you mean \"", near, "\"?");
  }
  return msg;
}

// Parses `args`; an exit code when parsing ends the program (help, an
// error), else -1.
int Parse(CLI::App& app, std::vector<std::string>& args) {
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
  return -1;
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

  // The parser is gone before the command runs: its table of options (about
  // 200 kB of heap by massif) is not kept for the life of the daemon.
  const std::vector<Subcommand> table = Subcommands();
  size_t chosen = 0;  // run
  Bound b;
  ConfigRequest req;
  {
    CLI::App app(
        "gpu-agent makes a node's NVIDIA GPUs schedulable in Kubernetes: as a kubelet device "
        "plugin (plugin mode), by writing Node capacity (static mode), or as a Dynamic Resource "
        "Allocation driver publishing ResourceSlices (dra mode, Kubernetes 1.34+). Flags without "
        "a subcommand (or none at all) run the agent, as NVIDIA's nvidia-device-plugin does.",
        "gpu-agent");
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "help for every subcommand");
    std::vector<std::unique_ptr<Bound>> bound;
    const std::vector<CLI::App*> apps = AddSubcommands(app, table, &bound);

    if (std::string unknown = UnknownSubcommand(app, args); !unknown.empty()) {
      std::fprintf(stderr, "%s\n", unknown.c_str());
      return kExitUsage;
    }
    if (int code = Parse(app, args); code >= 0) return code;

    // The deepest subcommand parsed: the last in the table (a group's own
    // come after it).
    for (size_t i = 0; i < table.size(); ++i) {
      if (apps[i]->parsed() && table[i].run != nullptr) chosen = i;
    }
    b = std::move(*bound[chosen]);
    // What asks the parser (which options were given) is asked now.
    if (table[chosen].loads_config) {
      req = BuildRequest(b.flags);
      req.strict = b.strict;
    }
    b.count_given = b.count_opt != nullptr && b.count_opt->count() > 0;
    b.count_opt = nullptr;
    b.flags.config_option = nullptr;
    b.flags.options.clear();
    b.flags.ignored_options.clear();
  }
  const Subcommand& s = table[chosen];
  b.how = how;
  if (!s.loads_config) return s.run(commands, b, ConfigRequest{}, LoadedConfig{});
  absl::StatusOr<LoadedConfig> loaded = Load(req);
  if (!loaded.ok()) return ReportConfigError(loaded.status());
  return s.run(commands, b, req, *std::move(loaded));
}

}  // namespace gpu_agent
