// The config's settings as command-line flags (cli_flags.h): every flag of
// the settings table sets its setting, a bad value is refused naming the
// flag, flags given twice follow Go's rule, NVIDIA's ignored flags are
// noted apart, a subcommand takes only the flags it reads, and Go's
// single-dash long flags are accepted.
#include "agent/cli/cli_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config_schema.h"
#include "agent/config/nvidia_compat.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Parses `args` (after the program's name) with the config flags `sel`
// picks; throws what CLI11 throws for a usage error.
ConfigRequest Parse(std::vector<std::string> args, const FlagSelection& sel = {}) {
  CLI::App app("test");
  ConfigFlags flags;
  AddConfigFlags(&app, &flags, sel);
  args.insert(args.begin(), "gpu-agent");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return BuildRequest(flags);
}

// The request loaded as `run` loads it, with no environment.
absl::StatusOr<LoadedConfig> Load(ConfigRequest req) {
  req.env = [](const std::string&) { return std::optional<std::string>(); };
  return LoadConfig(req);
}

std::string UsageError(const std::vector<std::string>& args, const FlagSelection& sel = {}) {
  try {
    Parse(args, sel);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "<parsed>";
}

// The process's CONFIG_FILE, set or unset for one test and put back after.
class ConfigFileEnv {
 public:
  explicit ConfigFileEnv(const char* value) {
    if (const char* old = std::getenv("CONFIG_FILE")) old_ = old;
    if (value == nullptr) {
      ::unsetenv("CONFIG_FILE");
    } else {
      ::setenv("CONFIG_FILE", value, 1);
    }
  }
  ~ConfigFileEnv() {
    if (old_.empty()) {
      ::unsetenv("CONFIG_FILE");
    } else {
      ::setenv("CONFIG_FILE", old_.c_str(), 1);
    }
  }

 private:
  std::string old_;
};

// A value of the setting's kind that the flag passes on as given.
std::string SampleValue(const Setting& s) {
  switch (s.kind) {
    case SettingKind::kBool:
      return "false";
    case SettingKind::kEnum:
      return std::string(s.choices.back());
    case SettingKind::kInt:
      return "3";
    default:
      return s.choices.empty() ? "sample" : std::string(s.choices.front());
  }
}

TEST(CliFlagsTest, EachFlagSetsItsOwnSettingAndNothingElse) {
  ConfigFileEnv env(nullptr);
  size_t checked = 0;
  for (const Setting& s : Settings()) {
    if (s.flag.empty()) continue;
    const std::string value = SampleValue(s);
    const ConfigRequest req = Parse({StrCat("--", s.flag, "=", value)});
    EXPECT_THAT(req.flags, ElementsAre(Pair(std::string(s.key), value))) << "--" << s.flag;
    EXPECT_TRUE(req.ignored_flags.empty()) << "--" << s.flag;
    ++checked;
  }
  EXPECT_GT(checked, 50u);  // the table's flags, not a handful
}

TEST(CliFlagsTest, NothingGivenRequestsNothing) {
  ConfigFileEnv env(nullptr);
  const ConfigRequest req = Parse({});
  EXPECT_TRUE(req.flags.empty());
  EXPECT_TRUE(req.ignored_flags.empty());
  EXPECT_EQ(req.file, "");
}

TEST(CliFlagsTest, ABoolFlagAloneMeansTrue) {
  const ConfigRequest req = Parse({"--fail-on-init-error", "--pass-device-specs=false"});
  EXPECT_THAT(req.flags, ElementsAre(Pair("flags.failOnInitError", "true"),
                                     Pair("flags.plugin.passDeviceSpecs", "false")));
  absl::StatusOr<LoadedConfig> loaded = Load(req);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->config.flags.fail_on_init_error);
  EXPECT_FALSE(loaded->config.flags.plugin.pass_device_specs);
  EXPECT_EQ(loaded->origins.at("flags.failOnInitError").detail, "flag --fail-on-init-error");
}

TEST(CliFlagsTest, TheConfigFlagWinsOverConfigFileInTheEnvironment) {
  ConfigFileEnv env("/etc/from-env.yaml");
  ConfigRequest req = Parse({"--config", "/etc/from-flag.yaml"});
  EXPECT_EQ(req.file, "/etc/from-flag.yaml");
  EXPECT_EQ(req.file_origin, "flag --config");
  req = Parse({"--config-file=/etc/second-name.yaml"});
  EXPECT_EQ(req.file, "/etc/second-name.yaml");
  req = Parse({});
  EXPECT_EQ(req.file, "/etc/from-env.yaml");
  EXPECT_EQ(req.file_origin, "env CONFIG_FILE");
}

// As NVIDIA's Go command line: a list flag accumulates, any other keeps the
// last value.
TEST(CliFlagsTest, AFlagGivenTwiceFollowsGosRule) {
  const ConfigRequest req =
      Parse({"--include-devices", "index:0", "--mig-strategy", "single", "--include-devices",
             "uuid:GPU-1,index:2", "--mig-strategy", "mixed"});
  absl::StatusOr<LoadedConfig> loaded = Load(req);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->config.devices.include, ElementsAre("index:0", "uuid:GPU-1", "index:2"));
  EXPECT_EQ(loaded->config.flags.mig_strategy, "mixed");
}

TEST(CliFlagsTest, ABadValueIsRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"--mig-strategy", "half"}, "flag --mig-strategy"},
      {{"--max-devices", "two"}, "flag --max-devices"},
      {{"--fail-on-init-error=maybe"}, "flag --fail-on-init-error"},
      {{"--health-poll-interval", "5 parsecs"}, "flag --health-poll-interval"},
      {{"--device-list-strategy", "envvar,carrier-pigeon"}, "flag --device-list-strategy"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LoadedConfig> loaded = Load(Parse(c.args));
    ASSERT_FALSE(loaded.ok()) << c.args[0];
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << c.args[0];
    EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(c.names));
  }
}

TEST(CliFlagsTest, NvidiasSecondNamesSetTheSameSetting) {
  for (const SettingAlias& a : SettingAliases()) {
    if (a.flag.empty()) continue;
    const ConfigRequest req = Parse({StrCat("--", a.flag, "=/somewhere")});
    EXPECT_THAT(req.flags, ElementsAre(Pair(std::string(a.key), "/somewhere"))) << a.flag;
  }
}

TEST(CliFlagsTest, NvidiasIgnoredFlagsAreNotedApartAndCheckedButOnlyWhereTaken) {
  const IgnoredNvidiaFlag& f = IgnoredNvidiaFlags().front();
  ASSERT_EQ(f.kind, IgnoredFlagKind::kBool);
  const ConfigRequest req = Parse({StrCat("--", f.flag)});
  EXPECT_TRUE(req.flags.empty());
  EXPECT_THAT(req.ignored_flags, ElementsAre(Pair(std::string(f.flag), "true")));
  EXPECT_TRUE(Load(req).ok());
  // A typo in an ignored flag's value is still an error, naming it.
  absl::StatusOr<LoadedConfig> bad = Load(Parse({StrCat("--", f.flag, "=yes please")}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(StrCat("--", f.flag)));

  FlagSelection sel;
  sel.nvidia_ignored = false;
  EXPECT_THAT(UsageError({StrCat("--", f.flag)}, sel), HasSubstr(StrCat("--", f.flag)));
}

TEST(CliFlagsTest, ProxyAloneMeansKubectlProxysAddressAndExcludesOtherServers) {
  ConfigRequest req = Parse({"--proxy"});
  EXPECT_THAT(req.flags, ElementsAre(Pair("apiServer.proxy", "http://127.0.0.1:8001")));
  req = Parse({"--proxy=http://127.0.0.1:9000"});
  EXPECT_THAT(req.flags, ElementsAre(Pair("apiServer.proxy", "http://127.0.0.1:9000")));
  const std::string error = UsageError({"--proxy", "--server", "https://10.0.0.1:6443"});
  EXPECT_THAT(error, HasSubstr("--proxy"));
  EXPECT_THAT(error, HasSubstr("--server"));
}

TEST(CliFlagsTest, ASubcommandTakesOnlyTheFlagsItReads) {
  FlagSelection devices;
  devices.applies = DevicesApplies();
  EXPECT_THAT(Parse({"--include-devices=index:0"}, devices).flags,
              ElementsAre(Pair("devices.include", "index:0")));
  EXPECT_THAT(UsageError({"--mig-strategy=mixed"}, devices), HasSubstr("--mig-strategy"));

  FlagSelection dra;
  dra.applies = DraSlicesApplies();
  EXPECT_THAT(Parse({"--mig-strategy=mixed"}, dra).flags,
              ElementsAre(Pair("flags.migStrategy", "mixed")));
  EXPECT_THAT(UsageError({"--pass-device-specs"}, dra), HasSubstr("--pass-device-specs"));

  // Plain `labels` prints: it reads no connection; `labels apply` does.
  EXPECT_THAT(UsageError({"--node-name=n1"}, {LabelsApplies("print")}), HasSubstr("--node-name"));
  EXPECT_THAT(Parse({"--node-name=n1"}, {LabelsApplies("apply")}).flags,
              ElementsAre(Pair("nodeName", "n1")));

  // `capacity get` reads the connection only; `set` also what it counts with.
  EXPECT_THAT(UsageError({"--mig-strategy=mixed"}, {CapacityApplies("get")}),
              HasSubstr("--mig-strategy"));
  EXPECT_THAT(Parse({"--mig-strategy=mixed"}, {CapacityApplies("set")}).flags,
              ElementsAre(Pair("flags.migStrategy", "mixed")));
}

TEST(CliFlagsTest, NodeIsASecondNameOfNodeNameWhereAsked) {
  FlagSelection sel;
  sel.node_alias = true;
  EXPECT_THAT(Parse({"--node", "n7"}, sel).flags, ElementsAre(Pair("nodeName", "n7")));
  EXPECT_THAT(UsageError({"--node", "n7"}), HasSubstr("--node"));
}

TEST(CliFlagsTest, RunsHelpListsEachModesFlagsInItsOwnSection) {
  CLI::App app("test");
  ConfigFlags flags;
  FlagSelection sel;
  sel.grouped = true;
  AddConfigFlags(&app, &flags, sel);
  EXPECT_EQ(flags.options.at("flags.plugin.passDeviceSpecs")->get_group(), "Plugin mode");
  EXPECT_EQ(flags.options.at("flags.migStrategy")->get_group(), "Common");
  EXPECT_EQ(flags.options.at("static.allocatable")->get_group(), "Static mode");
  EXPECT_EQ(flags.options.at("flags.plugin.cdiDisableHooks")->get_group(),
            "Plugin and DRA modes: the CDI spec and device nodes");
  EXPECT_EQ(flags.ignored_options.at(std::string(IgnoredNvidiaFlags().front().flag))->get_group(),
            "NVIDIA compatibility (accepted, ignored)");
  const std::string help = app.help();
  const size_t common = help.find("Common");
  const size_t plugin = help.find("Plugin mode");
  const size_t ignored = help.find("NVIDIA compatibility");
  ASSERT_NE(common, std::string::npos);
  EXPECT_LT(common, plugin);
  EXPECT_LT(plugin, ignored);
  EXPECT_NE(ignored, std::string::npos);
}

TEST(CliFlagsTest, GoStyleSingleDashLongFlagsBecomeDoubleDash) {
  CLI::App app("test");
  ConfigFlags flags;
  AddConfigFlags(&app, &flags);
  app.add_option("-o,--output");
  std::vector<std::string> args = {"gpu-agent", "-mig-strategy=mixed", "-fail-on-init-error", "-o",
                                   "json",      "-no-such-flag",       "--resource-name",     "x",
                                   "--",        "-mig-strategy"};
  AcceptSingleDashLongFlags(app, &args);
  EXPECT_THAT(args,
              ElementsAre("gpu-agent", "--mig-strategy=mixed", "--fail-on-init-error", "-o", "json",
                          "-no-such-flag", "--resource-name", "x", "--", "-mig-strategy"));
}

}  // namespace
}  // namespace gpu_agent
