#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "agent/cli/config_command.h"
#include "agent/config/config_loader.h"
#include "agent/config/dra_taints.h"
#include "base/strings.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using gpu_agent::testing::SourceDir;
using gpu_agent::testing::TempDir;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<LoadedConfig> LoadText(const std::string& yaml,
                                      std::map<std::string, std::string> env = {},
                                      std::vector<std::pair<std::string, std::string>> flags = {}) {
  TempDir dir;
  ConfigRequest req;
  req.file = dir.Write("config.yaml", yaml);
  req.file_origin = "flag --config";
  req.env = Env(std::move(env));
  req.flags = std::move(flags);
  req.dir_exists = [](const std::string&) { return false; };
  auto loaded = LoadConfig(req);
  return loaded;
}

std::string ErrorOf(const absl::StatusOr<LoadedConfig>& r) {
  return r.ok() ? "<ok>" : std::string(r.status().message());
}

TEST(ConfigTest, DefaultsWithoutFile) {
  ConfigRequest req;
  req.env = Env({});
  req.dir_exists = [](const std::string&) { return false; };
  auto loaded = LoadConfig(req);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Config& c = loaded->config;
  EXPECT_EQ(c.mode, "plugin");
  EXPECT_EQ(c.resource_name, "nvidia.com/gpu");
  EXPECT_EQ(c.flags.mig_strategy, "none");
  EXPECT_TRUE(c.flags.fail_on_init_error);
  EXPECT_EQ(c.flags.plugin.device_list_strategy, std::vector<std::string>{"envvar"});
  EXPECT_EQ(c.health.ignored_xids, (std::vector<int>{13, 31, 43, 45, 68, 109}));
  EXPECT_EQ(c.kubelet.socket, "/var/lib/kubelet/device-plugins/kubelet.sock");
  EXPECT_TRUE(loaded->origins.empty());
}

TEST(ConfigTest, NvidiaDevicePluginFileLoadsUnchanged) {
  // The shape of NVIDIA's documented config, gfd section included.
  auto loaded = LoadText(R"(version: v1
flags:
  migStrategy: "single"
  failOnInitError: true
  nvidiaDriverRoot: "/run/nvidia/driver"
  plugin:
    passDeviceSpecs: true
    deviceListStrategy:
      - envvar
      - cdi-annotations
    deviceIDStrategy: index
    containerDriverRoot: /driver-root
  gfd:
    oneshot: false
    noTimestamp: false
    sleepInterval: 60s
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: false
    resources:
    - name: nvidia.com/gpu
      replicas: 10
)");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Config& c = loaded->config;
  EXPECT_EQ(c.flags.mig_strategy, "single");
  EXPECT_EQ(c.flags.nvidia_driver_root, "/run/nvidia/driver");
  EXPECT_TRUE(c.flags.plugin.pass_device_specs);
  EXPECT_EQ(c.flags.plugin.device_list_strategy,
            (std::vector<std::string>{"envvar", "cdi-annotations"}));
  EXPECT_EQ(c.flags.plugin.device_id_strategy, "index");
  ASSERT_EQ(c.sharing.time_slicing.resources.size(), 1u);
  EXPECT_EQ(c.sharing.time_slicing.resources[0].replicas, 10);
  EXPECT_EQ(c.sharing.time_slicing.resources[0].devices, std::vector<std::string>{"all"});
  ASSERT_EQ(loaded->notes.size(), 1u);
  EXPECT_NE(loaded->notes[0].find("flags.gfd"), std::string::npos);
  EXPECT_EQ(loaded->origins.at("flags.migStrategy")
                .detail.substr(loaded->origins.at("flags.migStrategy").detail.size() - 4),
            ":3:3");
}

TEST(ConfigTest, DeviceListStrategyAsSingleValue) {
  auto loaded = LoadText("version: v1\nflags:\n  plugin:\n    deviceListStrategy: volume-mounts\n");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.flags.plugin.device_list_strategy,
            std::vector<std::string>{"volume-mounts"});
}

TEST(ConfigTest, PrecedenceFlagOverEnvOverFileOverDefault) {
  auto loaded = LoadText(
      "version: v1\nflags:\n  migStrategy: single\n  failOnInitError: false\n"
      "  plugin:\n    deviceIDStrategy: index\n",
      {{"MIG_STRATEGY", "mixed"}, {"DEVICE_ID_STRATEGY", "uuid"}}, {{"flags.migStrategy", "none"}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Config& c = loaded->config;
  EXPECT_EQ(c.flags.mig_strategy, "none");               // flag beats env and file
  EXPECT_EQ(c.flags.plugin.device_id_strategy, "uuid");  // env beats file
  EXPECT_FALSE(c.flags.fail_on_init_error);              // file beats default
  EXPECT_EQ(loaded->origins.at("flags.migStrategy").source, ValueSource::kFlag);
  EXPECT_EQ(loaded->origins.at("flags.migStrategy").detail, "flag --mig-strategy");
  EXPECT_EQ(loaded->origins.at("flags.plugin.deviceIDStrategy").detail, "env DEVICE_ID_STRATEGY");
  EXPECT_EQ(loaded->origins.at("flags.failOnInitError").source, ValueSource::kFile);
  EXPECT_EQ(loaded->origins.count("resourceName"), 0u);

  std::string report = ConfigReport(*loaded);
  EXPECT_NE(report.find("migStrategy: none"), std::string::npos) << report;
  EXPECT_NE(report.find("# flag --mig-strategy"), std::string::npos) << report;
  EXPECT_NE(report.find("# env DEVICE_ID_STRATEGY"), std::string::npos) << report;
  EXPECT_NE(report.find("config.yaml:4:3"), std::string::npos) << report;
}

TEST(ConfigTest, ReportReadsBackToTheSameConfig) {
  auto loaded = LoadText(
      "version: v1\nmode: static\nnodeName: node-a\n"
      "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
      "      replicas: 4\n");
  ASSERT_TRUE(loaded.ok());
  const std::string report = ConfigReport(*loaded);
  auto again = LoadText(report);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << report;
  EXPECT_EQ(again->config.mode, "static");
  EXPECT_EQ(again->config.node_name, "node-a");
  ASSERT_EQ(again->config.sharing.time_slicing.resources.size(), 1u);
  EXPECT_EQ(again->config.sharing.time_slicing.resources[0].replicas, 4);
}

TEST(ConfigTest, HealthCheckEnvVarsAsNvidiaDefinesThem) {
  auto disabled = LoadText("version: v1\n", {{"DP_DISABLE_HEALTHCHECKS", "all"}});
  ASSERT_TRUE(disabled.ok());
  EXPECT_TRUE(disabled->config.health.disabled);
  auto more = LoadText("version: v1\n", {{"DP_DISABLE_HEALTHCHECKS", "48, 63"}});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->config.health.ignored_xids, (std::vector<int>{13, 31, 43, 45, 68, 109, 48, 63}));
  auto enable = LoadText("version: v1\n", {{"DP_ENABLE_HEALTHCHECKS", "13"}});
  ASSERT_TRUE(enable.ok());
  EXPECT_EQ(enable->config.health.critical_xids, std::vector<int>{13});
  auto bad = LoadText("version: v1\n", {{"DP_DISABLE_HEALTHCHECKS", "some"}});
  EXPECT_NE(ErrorOf(bad).find("DP_DISABLE_HEALTHCHECKS=\"some\""), std::string::npos)
      << ErrorOf(bad);
}

struct BadCase {
  const char* name;
  std::string yaml;
  std::string expect;  // a part of the error message
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, NamesWhatAndWhere) {
  const BadCase& c = GetParam();
  auto loaded = LoadText(c.yaml);
  ASSERT_FALSE(loaded.ok()) << c.name;
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ErrorOf(loaded).find(c.expect), std::string::npos)
      << c.name << ": got \"" << ErrorOf(loaded) << "\", wanted \"" << c.expect << "\"";
}

INSTANTIATE_TEST_SUITE_P(
    All, BadConfigTest,
    ::testing::Values(
        BadCase{"WrongTypeBool", "version: v1\nflags:\n  failOnInitError: maybe\n",
                "config.yaml:3:20: invalid value \"maybe\" for flags.failOnInitError: expected "
                "true or false"},
        BadCase{"WrongTypeMapForScalar", "version: v1\nmode:\n  a: b\n",
                "config.yaml:3:3: mode must be a single value, not a mapping"},
        BadCase{"WrongTypeScalarForMap", "version: v1\nflags: 3\n",
                "config.yaml:2:8: flags must be a mapping"},
        BadCase{"UnknownVersion", "version: v2\n",
                "config.yaml:1:10: unknown config version \"v2\"; gpu-agent reads version v1"},
        BadCase{"InvalidEnum", "version: v1\nflags:\n  migStrategy: singel\n",
                "invalid value \"singel\" for flags.migStrategy (one of none, single, mixed); did "
                "you mean \"single\"?"},
        BadCase{"InvalidListItem",
                "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [envvar, cdi]\n",
                "invalid value \"cdi\" for flags.plugin.deviceListStrategy"},
        BadCase{"ReplicasBelowTwo",
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: "
                "nvidia.com/gpu\n      replicas: 1\n",
                "config.yaml:6:17: replicas: 1 is too few"},
        BadCase{"ReplicasNotANumber",
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: "
                "nvidia.com/gpu\n      replicas: many\n",
                "replicas must be a whole number"},
        BadCase{"ResourceNoDomain", "version: v1\nresourceName: gpu\n",
                "resourceName: resource name \"gpu\" has no domain"},
        BadCase{"ResourceKubernetesDomain", "version: v1\nresourceName: kubernetes.io/gpu\n",
                "reserved domain"},
        BadCase{"ResourceTooLong",
                "version: v1\nresourceName: nvidia.com/" + std::string(64, 'a') + "\n",
                "at most 63 are allowed"},
        BadCase{"TimeSlicingUnknownResource",
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: "
                "example.com/gpu\n      replicas: 2\n",
                "is not a resource this agent advertises"},
        BadCase{"BinaryGarbage",
                std::string("\x7f"
                            "ELF\x02\x01\x01\0\0\0",
                            10),
                "not a YAML text file (a NUL byte at offset 7)"},
        BadCase{"TopLevelScalar", "just some words\n", "the top level must be a mapping"},
        BadCase{"BrokenYaml", "version: v1\nflags: [1, 2\nmode: x\n", "config.yaml:3:"},
        BadCase{"Mps", "version: v1\nsharing:\n  mps:\n    resources: []\n",
                "sharing.mps (CUDA MPS) is not supported"},
        BadCase{"BadDuration", "version: v1\nhealth:\n  recoveryPeriod: soon\n",
                "health.recoveryPeriod: invalid duration \"soon\""},
        BadCase{"BadEndpoint", "version: v1\nkubelet:\n  endpoint: a/b.sock\n",
                "must be a bare socket file name"},
        BadCase{"WatchTimeoutTooShort", "version: v1\nstatic:\n  watchTimeout: 500ms\n",
                "static.watchTimeout must be at least 1s"},
        BadCase{"WatchTimeoutNotADuration", "version: v1\nstatic:\n  watchTimeout: forever\n",
                "static.watchTimeout: invalid duration \"forever\""},
        BadCase{"DriverWaitTooLong", "version: v1\ndriver:\n  waitTimeout: 25h\n",
                "driver.waitTimeout must be between 0 and 24h"},
        BadCase{"StreamGraceTooShort", "version: v1\nkubelet:\n  streamGracePeriod: 10ms\n",
                "kubelet.streamGracePeriod must be between 100ms and 5m"},
        BadCase{"EventWaitTooShort", "version: v1\nhealth:\n  eventWaitTimeout: 1ms\n",
                "health.eventWaitTimeout must be between 10ms and 1m"},
        BadCase{"EventWaitTooLong", "version: v1\nhealth:\n  eventWaitTimeout: 2m\n",
                "health.eventWaitTimeout must be between 10ms and 1m"},
        BadCase{"DraDriverNameNotASubdomain",
                "version: v1\nmode: dra\ndra:\n  driverName: GPU_Driver\n",
                "dra.driverName \"GPU_Driver\" is not a DNS subdomain"},
        BadCase{"DraDriverNameTooLong",
                "version: v1\nmode: dra\ndra:\n  driverName: " + std::string(60, 'g') +
                    ".example.com\n",
                "is longer than 63 characters"},
        BadCase{"DraRegistryDirRelative", "version: v1\ndra:\n  registryDir: plugins_registry\n",
                "dra.registryDir: \"plugins_registry\" must be an absolute path"},
        BadCase{"DraModeWithoutCdiSpecDir", "version: v1\nmode: dra\ncdi:\n  specDir: \"\"\n",
                "cdi.specDir: empty, but DRA mode writes each prepared claim's CDI spec there"},
        BadCase{"DraModeNodeLabels", "version: v1\nmode: dra\nnodeLabels:\n  output: node\n",
                "in dra mode use \"nfd\""},
        BadCase{"DraModeMisspelt", "version: v1\nmode: dar\n",
                "invalid value \"dar\" for mode (one of plugin, static, dra)"},
        BadCase{"DraTaintsUnknownCause", "version: v1\ndra:\n  taints:\n    temprature: None\n",
                "config.yaml:4:5: dra.taints: unknown cause \"temprature\"; did you mean "
                "\"temperature\"?"},
        BadCase{"DraTaintsBadEffect", "version: v1\ndra:\n  taints:\n    lost: NoExecut\n",
                "config.yaml:4:11: dra.taints.lost: the value \"NoExecut\" is not one of None, "
                "NoSchedule, "
                "NoExecute, off; did you mean \"NoExecute\"?"},
        BadCase{"DraPodUidNotAUid", "version: v1\ndra:\n  podUid: ../x\n",
                "dra.podUid \"../x\" is not a pod UID"},
        BadCase{"PollIntervalTooShort", "version: v1\nhealth:\n  pollInterval: 100ms\n",
                "health.pollInterval must be between 1s and 1h"},
        BadCase{"CheckUnknownName",
                "version: v1\nhealth:\n  checks:\n    temprature:\n      severity: ignore\n",
                "config.yaml:4:5: unknown health check \"temprature\"; did you mean "
                "\"temperature\"?"},
        BadCase{"CheckSeverityMisspelled",
                "version: v1\nhealth:\n  checks:\n    nvlink:\n      severity: unhealty\n",
                "config.yaml:5:17: health.checks.nvlink.severity: the value \"unhealty\" is not "
                "one of unhealthy, degraded, ignore; did you mean \"unhealthy\"?"},
        BadCase{"CheckThresholdOutOfRange",
                "version: v1\nhealth:\n  checks:\n    temperature:\n      threshold: 80\n",
                "config.yaml:5:18: health.checks.temperature.threshold: the value \"80\" is out "
                "of range; it is the degrees Celsius below the GPU's own slowdown temperature at "
                "which it counts, from 0 to 50"},
        BadCase{"CheckThresholdNotANumber",
                "version: v1\nhealth:\n  checks:\n    pcieReplays:\n      threshold: lots\n",
                "config.yaml:5:18: health.checks.pcieReplays.threshold: the value \"lots\" is "
                "out of range"},
        BadCase{"CheckThresholdWhereNoneApplies",
                "version: v1\nhealth:\n  checks:\n    pcieWidth:\n      threshold: 1\n",
                "config.yaml:5:7: health.checks.pcieWidth takes no threshold"},
        BadCase{"CheckUnknownField",
                "version: v1\nhealth:\n  checks:\n    nvlink:\n      severty: ignore\n",
                "config.yaml:5:7: unknown key \"severty\" in health.checks.nvlink; it takes "
                "severity and threshold"},
        BadCase{"CheckNotAMapping", "version: v1\nhealth:\n  checks:\n    nvlink: off\n",
                "config.yaml:4:13: health.checks.nvlink must be a mapping"},
        // Hostile or careless input: a key given twice would run one of the
        // two without a word; replicas past what a kubelet takes; an
        // endpoint with a newline (or anything but a plain file name).
        BadCase{"DuplicateTopLevelKey", "version: v1\nmode: plugin\nmode: static\n",
                "config.yaml:3:1: the key \"mode\" appears twice (first at line 2); give each "
                "key once"},
        BadCase{"DuplicateNestedKey",
                "version: v1\nflags:\n  migStrategy: none\n  migStrategy: mixed\n",
                "config.yaml:4:3: the key \"migStrategy\" appears twice in flags (first at line "
                "3)"},
        BadCase{"DuplicateKeyInASharingEntry",
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: "
                "nvidia.com/gpu\n      replicas: 2\n      replicas: 4\n",
                "config.yaml:7:7: the key \"replicas\" appears twice in a "
                "sharing.timeSlicing.resources entry"},
        BadCase{"DuplicateCheck",
                "version: v1\nhealth:\n  checks:\n    nvlink: {severity: ignore}\n    nvlink: "
                "{severity: unhealthy}\n",
                "config.yaml:5:5: the key \"nvlink\" appears twice in health.checks"},
        BadCase{"ReplicasPastTheBound",
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: "
                "nvidia.com/gpu\n      replicas: 1000000000\n",
                "config.yaml:6:17: replicas: 1000000000 is more than the 1024 a GPU may be shared "
                "by"},
        BadCase{"ReplicasJustPastTheBound",
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: "
                "nvidia.com/gpu\n      replicas: 1025\n",
                "replicas: 1025 is more than the 1024"},
        BadCase{"EndpointWithANewline", "version: v1\nkubelet:\n  endpoint: \"a.sock\\nb\"\n",
                "kubelet.endpoint: \"a.sock\\x0ab\" must be a bare socket file name of letters"},
        BadCase{"EndpointDotDot", "version: v1\nkubelet:\n  endpoint: ..\n",
                "not starting with '.'"}),
    [](const ::testing::TestParamInfo<BadCase>& p) { return p.param.name; });

TEST(ConfigTest, HealthChecksFromTheFile) {
  auto loaded = LoadText(
      "version: v1\nhealth:\n  pollInterval: 10s\n  checks:\n    temperature:\n"
      "      severity: unhealthy\n      threshold: 3\n    pcieWidth:\n      severity: ignore\n"
      "    nvlink: {threshold: 2}\n");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Config::Health& h = loaded->config.health;
  EXPECT_EQ(h.poll_interval, std::chrono::seconds(10));
  EXPECT_EQ(h.checks[health::CheckId::kTemperature].severity, health::Severity::kUnhealthy);
  EXPECT_EQ(h.checks[health::CheckId::kTemperature].threshold, 3);
  EXPECT_EQ(h.checks[health::CheckId::kPcieWidth].severity, health::Severity::kOk);
  // A field left out keeps the catalog's default.
  EXPECT_EQ(h.checks[health::CheckId::kNvLink].severity, health::Severity::kUnhealthy);
  EXPECT_EQ(h.checks[health::CheckId::kNvLink].threshold, 2);
  EXPECT_EQ(h.checks[health::CheckId::kEccUncorrectable].threshold, 1);
}

// `gpu-agent config` shows every check's setting, where it came from, in a
// form the config file takes back.
TEST(ConfigTest, ConfigReportShowsEveryHealthCheckAndReadsBack) {
  auto loaded = LoadText(
      "version: v1\nhealth:\n  checks:\n    temperature: {severity: unhealthy, threshold: 3}\n");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::string report = ConfigReport(*loaded);
  EXPECT_THAT(report, ::testing::HasSubstr("    temperature: {severity: unhealthy, threshold: 3}"));
  EXPECT_THAT(report, ::testing::HasSubstr("    pcieWidth: {severity: degraded}"));
  EXPECT_THAT(report, ::testing::HasSubstr("  checks:"));
  auto again = LoadText(report);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << report;
  EXPECT_EQ(again->config.health.checks, loaded->config.health.checks);
}

TEST(ConfigTest, HealthCheckDefaultsTakeNoGpuForWhatDoesNotBreakJobs) {
  auto loaded = LoadText("version: v1\n");
  ASSERT_TRUE(loaded.ok());
  const health::CheckSettings& c = loaded->config.health.checks;
  EXPECT_EQ(loaded->config.health.poll_interval, std::chrono::seconds(30));
  for (health::CheckId id :
       {health::CheckId::kTemperature, health::CheckId::kClockEvents, health::CheckId::kPcieWidth,
        health::CheckId::kPcieGeneration, health::CheckId::kPcieReplays,
        health::CheckId::kRowRemapPending, health::CheckId::kRetiredPagesPending}) {
    EXPECT_EQ(c[id].severity, health::Severity::kDegraded) << health::Spec(id).name;
  }
}

TEST(ConfigTest, DraModeAndItsSettingsFromFileFlagsAndEnv) {
  auto loaded = LoadText("version: v1\nmode: dra\ndra:\n  pluginDir: /k/plugins\n",
                         {{"GPU_AGENT_DRA_DRIVER_NAME", "gpu.example.com"}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.agent_mode(), AgentMode::kDra);
  EXPECT_EQ(loaded->config.dra.driver_name, "gpu.example.com");
  EXPECT_EQ(loaded->config.dra.plugin_dir, "/k/plugins");
  EXPECT_EQ(loaded->config.dra.registry_dir, "/var/lib/kubelet/plugins_registry");
  Config defaults;
  EXPECT_EQ(defaults.dra.driver_name, "gpu.gpu-agent.github.io");
  EXPECT_EQ(defaults.dra.plugin_dir, "/var/lib/kubelet/plugins");
}

// dra.taints: each cause's effect, the defaults where unset (off the bus
// and a driver's reset or reboot NoExecute, other unhealthy causes
// NoSchedule, degraded checks None, ignored ones off), a check's severity
// moving its default; the pod UID from POD_UID.
TEST(ConfigTest, DraTaintEffectsAndThePodUid) {
  auto loaded = LoadText(
      "version: v1\nmode: dra\nhealth:\n  checks:\n    temperature: {severity: unhealthy}\n"
      "    pcieWidth: {severity: ignore}\ndra:\n  taints:\n    xid: NoExecute\n"
      "    clockEvents: off\n",
      {{"POD_UID", "9a2e4b77-5c3d-4f1a-8b62-1e7b2c8f1b02"}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Config& c = loaded->config;
  EXPECT_EQ(c.dra.pod_uid, "9a2e4b77-5c3d-4f1a-8b62-1e7b2c8f1b02");
  EXPECT_EQ(DraTaintEffect(c, "xid"), "NoExecute");    // set
  EXPECT_EQ(DraTaintEffect(c, "clockEvents"), "off");  // set
  EXPECT_EQ(DraTaintEffect(c, "lost"), "NoExecute");   // defaults:
  EXPECT_EQ(DraTaintEffect(c, "recoveryAction"), "NoExecute");
  EXPECT_EQ(DraTaintEffect(c, "rowRemapFailed"), "NoSchedule");
  EXPECT_EQ(DraTaintEffect(c, "temperature"), "NoSchedule");  // made unhealthy above
  EXPECT_EQ(DraTaintEffect(c, "pcieReplays"), "None");
  EXPECT_EQ(DraTaintEffect(c, "pcieWidth"), "off");
  EXPECT_EQ(DraTaintCauses().size(), 2 + health::kCheckCount);
}

TEST(ConfigTest, MissingFile) {
  ConfigRequest req;
  req.file = "/nonexistent/gpu-agent.yaml";
  req.file_origin = "env CONFIG_FILE";
  req.env = Env({});
  auto loaded = LoadConfig(req);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ErrorOf(loaded).find("cannot read config file \"/nonexistent/gpu-agent.yaml\" (named "
                                 "by env CONFIG_FILE): No such file or directory"),
            std::string::npos)
      << ErrorOf(loaded);
}

TEST(ConfigTest, DirectoryInsteadOfFile) {
  TempDir dir;
  ConfigRequest req;
  req.file = dir.path();
  req.env = Env({});
  auto loaded = LoadConfig(req);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(ErrorOf(loaded).find(dir.path()), std::string::npos) << ErrorOf(loaded);
}

// A FIFO (or a device) named as the config file is refused at once: opened
// without blocking, it is not a regular file. Read as it was, `config` hung
// and a reload blocked the main thread, so SIGTERM went unanswered.
TEST(ConfigTest, AFifoOrDeviceInsteadOfAFileIsRefusedAtOnce) {
  TempDir dir;
  const std::string fifo = dir.Join("config.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    ConfigRequest req;
    req.file = path;
    req.file_origin = "flag --config";
    req.env = Env({});
    auto loaded = LoadConfig(req);
    ASSERT_FALSE(loaded.ok()) << path;
    EXPECT_NE(ErrorOf(loaded).find("cannot read config file \"" + path +
                                   "\" (named by flag --config): it is a "),
              std::string::npos)
        << ErrorOf(loaded);
    EXPECT_NE(ErrorOf(loaded).find("not a regular file"), std::string::npos) << ErrorOf(loaded);
  }
}

TEST(ConfigTest, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  TempDir dir;
  const std::string path = dir.Write("c.yaml", "version: v1\n");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  ConfigRequest req;
  req.file = path;
  req.env = Env({});
  auto loaded = LoadConfig(req);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(ConfigTest, BadEnvAndFlagValuesNameTheirSource) {
  auto env = LoadText("version: v1\n", {{"MIG_STRATEGY", "all"}});
  EXPECT_NE(ErrorOf(env).find("env MIG_STRATEGY: invalid value \"all\""), std::string::npos)
      << ErrorOf(env);
  auto flag = LoadText("version: v1\n", {}, {{"flags.plugin.passDeviceSpecs", "perhaps"}});
  EXPECT_NE(ErrorOf(flag).find("flag --pass-device-specs: invalid value \"perhaps\""),
            std::string::npos)
      << ErrorOf(flag);
  auto resource = LoadText("version: v1\n", {}, {{"resourceName", "gpu"}});
  EXPECT_NE(ErrorOf(resource).find("flag --resource-name: resourceName:"), std::string::npos)
      << ErrorOf(resource);
}

TEST(ConfigTest, ShippedExampleConfigsLoad) {
  for (const char* name :
       {"plugin.yaml", "static.yaml", "time-slicing.yaml", "mig-mixed.yaml", "dra.yaml"}) {
    ConfigRequest req;
    req.file = SourceDir() + "/config/" + name;
    req.env = Env({});
    auto loaded = LoadConfig(req);
    EXPECT_TRUE(loaded.ok()) << name << ": " << loaded.status();
  }
}

TEST(ConfigTest, DeviceSelectionAndSharingSubsetsLoad) {
  auto loaded = LoadText(R"(version: v1
devices:
  include: ["name:*H100*", "index:0"]
  exclude: [GPU-abc]
  max: 4
sharing:
  timeSlicing:
    allocationPolicy: packed
    honor: [devices, rename]
    resources:
    - name: nvidia.com/gpu
      replicas: 2
      devices: 3
      rename: nvidia.com/gpu.shared
)");
  ASSERT_TRUE(loaded.ok()) << ErrorOf(loaded);
  const Config& c = loaded->config;
  EXPECT_EQ(c.devices.include, (std::vector<std::string>{"name:*H100*", "index:0"}));
  EXPECT_EQ(c.devices.exclude, (std::vector<std::string>{"GPU-abc"}));
  EXPECT_EQ(c.devices.max, 4);
  EXPECT_EQ(c.sharing.time_slicing.allocation_policy, "packed");
  EXPECT_EQ(c.sharing.time_slicing.resources.at(0).device_count, 3);
  EXPECT_TRUE(c.sharing.time_slicing.resources.at(0).devices.empty());
  // From env and flags too.
  auto env = LoadText("version: v1\n", {{"GPU_AGENT_EXCLUDE_DEVICES", "index:1,index:2"}},
                      {{"devices.max", "2"}});
  ASSERT_TRUE(env.ok()) << ErrorOf(env);
  EXPECT_EQ(env->config.devices.exclude, (std::vector<std::string>{"index:1", "index:2"}));
  EXPECT_EQ(env->config.devices.max, 2);
}

TEST(ConfigTest, BadSelectionAndSharingValuesAreNamed) {
  EXPECT_THAT(ErrorOf(LoadText("version: v1\ndevices:\n  include: [\"gpu:1\"]\n")),
              ::testing::HasSubstr("devices.include[0] \"gpu:1\": unknown selector kind"));
  EXPECT_THAT(ErrorOf(LoadText("version: v1\ndevices:\n  max: lots\n")),
              ::testing::HasSubstr("invalid value \"lots\" for devices.max"));
  EXPECT_THAT(ErrorOf(LoadText("version: v1\ndevices:\n  max: -1\n")),
              ::testing::HasSubstr("devices.max"));
  auto typo = LoadText("version: v1\ndevices:\n  incude: [index:0]\n");
  ASSERT_TRUE(typo.ok()) << ErrorOf(typo);
  ASSERT_EQ(typo->warnings.size(), 1u);
  EXPECT_THAT(typo->warnings[0], ::testing::HasSubstr("did you mean \"include\""));
  const std::string sharing = R"(version: v1
sharing:
  timeSlicing:
    honor: [devices]
    resources:
    - name: nvidia.com/gpu
      replicas: 2
      devices: )";
  EXPECT_THAT(ErrorOf(LoadText(sharing + "some\n")),
              ::testing::HasSubstr("devices must be \"all\", a count of 1 or more"));
  EXPECT_THAT(ErrorOf(LoadText(sharing + "0\n")),
              ::testing::HasSubstr("devices must be \"all\", a count of 1 or more"));
  EXPECT_THAT(ErrorOf(LoadText(sharing + "[]\n")),
              ::testing::HasSubstr("devices is an empty list"));
  EXPECT_THAT(ErrorOf(LoadText(sharing + "[0, \"0\"]\n")),
              ::testing::HasSubstr("devices: \"0\" is listed twice"));
  EXPECT_THAT(ErrorOf(LoadText(sharing + "[all, 1]\n")),
              ::testing::HasSubstr("\"all\" cannot be listed with other devices"));
  EXPECT_THAT(
      ErrorOf(LoadText("version: v1\nsharing:\n  timeSlicing:\n    allocationPolicy: tight\n")),
      ::testing::HasSubstr("tight"));
}

}  // namespace
}  // namespace gpu_agent

namespace gpu_agent {
namespace {

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

TEST(NvidiaReadingTest, EmptyAndCommentOnlyFilesAreTheDefaults) {
  for (const std::string text : {"", "# nothing here\n", "---\n# only a comment\n"}) {
    auto loaded = LoadText(text);
    ASSERT_TRUE(loaded.ok()) << "\"" << text << "\": " << ErrorOf(loaded);
    EXPECT_EQ(loaded->config.resource_name, "nvidia.com/gpu");
    EXPECT_EQ(loaded->config.flags.mig_strategy, "none");
    EXPECT_THAT(Joined(loaded->notes), ::testing::HasSubstr("is empty (or only comments)"));
  }
}

TEST(NvidiaReadingTest, UnknownKeysAreWarningsNamingTheNearestKey) {
  struct Case {
    std::string yaml;
    std::string expect;
  } cases[] = {
      {"version: v1\nflags:\n  migStrategi: none\n",
       "config.yaml:3:3: unknown key \"migStrategi\" in flags; did you mean \"migStrategy\"?"},
      {"version: v1\nfoo: 1\n", "config.yaml:2:1: unknown key \"foo\""},
      {"version: v1\nflags:\n  plugin:\n    passDeviceSpec: true\n",
       "did you mean \"passDeviceSpecs\"?"},
      {"version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
       "      replicas: 2\n      replica: 3\n",
       "config.yaml:7:7: unknown key \"replica\" in a sharing.timeSlicing.resources entry; did you "
       "mean \"replicas\"?"},
  };
  for (const Case& c : cases) {
    auto loaded = LoadText(c.yaml);
    ASSERT_TRUE(loaded.ok()) << ErrorOf(loaded);
    EXPECT_THAT(Joined(loaded->warnings), ::testing::HasSubstr(c.expect));
    const std::string report = ConfigReport(*loaded);
    EXPECT_THAT(report, ::testing::HasSubstr("# warning: "));
    EXPECT_THAT(report, ::testing::HasSubstr(c.expect));
    // --strict refuses the same file, with the same words.
    TempDir dir;
    ConfigRequest req;
    req.file = dir.Write("config.yaml", c.yaml);
    req.env = Env({});
    req.strict = true;
    auto strict = LoadConfig(req);
    ASSERT_FALSE(strict.ok());
    EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ErrorOf(strict), ::testing::HasSubstr(c.expect));
    EXPECT_THAT(ErrorOf(strict), ::testing::HasSubstr("--strict"));
  }
}

TEST(NvidiaReadingTest, BareResourceNamesAreInTheNvidiaDomain) {
  auto loaded = LoadText(
      "version: v1\nsharing:\n  timeSlicing:\n    honor: [rename]\n    resources:\n"
      "    - name: gpu\n      replicas: 2\n      rename: gpu-shared\n");
  ASSERT_TRUE(loaded.ok()) << ErrorOf(loaded);
  const TimeSlicingResource& r = loaded->config.sharing.time_slicing.resources.at(0);
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.rename, "nvidia.com/gpu-shared");
}

// NVIDIA v0.20 ignores a time-sliced resource's devices and rename, with a
// warning: a file written for it runs with its result here too.
TEST(NvidiaReadingTest, TimeSlicingDevicesAndRenameAreIgnoredUnlessHonoured) {
  const std::string body =
      "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
      "      devices: [0, 1]\n      rename: nvidia.com/gpu-shared\n";
  auto nvidia = LoadText("version: v1\nsharing:\n  timeSlicing:\n" + body);
  ASSERT_TRUE(nvidia.ok()) << ErrorOf(nvidia);
  const TimeSlicingResource& r = nvidia->config.sharing.time_slicing.resources.at(0);
  EXPECT_EQ(r.devices, std::vector<std::string>{"all"});
  EXPECT_TRUE(r.rename.empty());
  const std::string warnings = Joined(nvidia->warnings);
  EXPECT_THAT(warnings, ::testing::HasSubstr("sharing.timeSlicing.resources[nvidia.com/gpu]."
                                             "devices is ignored: every GPU is shared"));
  EXPECT_THAT(warnings, ::testing::HasSubstr("add \"honor: [devices]\" under sharing.timeSlicing"));
  EXPECT_THAT(warnings, ::testing::HasSubstr("rename (nvidia.com/gpu-shared) is ignored"));
  EXPECT_THAT(warnings, ::testing::HasSubstr("add \"honor: [rename]\""));
  // A devices list that gpu-agent's own reading would refuse (a GPU listed
  // twice) runs too: NVIDIA never looks at it.
  auto twice = LoadText(
      "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
      "      replicas: 2\n      devices: [0, \"0\"]\n");
  EXPECT_TRUE(twice.ok()) << ErrorOf(twice);
  // Opted in: gpu-agent's meaning, no warning.
  auto ours =
      LoadText("version: v1\nsharing:\n  timeSlicing:\n    honor: [devices, rename]\n" + body);
  ASSERT_TRUE(ours.ok()) << ErrorOf(ours);
  const TimeSlicingResource& o = ours->config.sharing.time_slicing.resources.at(0);
  EXPECT_EQ(o.devices, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(o.rename, "nvidia.com/gpu-shared");
  EXPECT_TRUE(ours->warnings.empty()) << Joined(ours->warnings);
  EXPECT_THAT(ErrorOf(LoadText("version: v1\nsharing:\n  timeSlicing:\n    honor: [device]\n")),
              ::testing::HasSubstr("did you mean \"devices\"?"));
}

TEST(NvidiaReadingTest, BooleansInFlagsAndEnvAreGoBooleans) {
  for (const char* yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    auto env = LoadText("version: v1\n", {{"PASS_DEVICE_SPECS", yes}});
    ASSERT_TRUE(env.ok()) << yes << ": " << ErrorOf(env);
    EXPECT_TRUE(env->config.flags.plugin.pass_device_specs) << yes;
    auto flag = LoadText("version: v1\n", {}, {{"flags.plugin.passDeviceSpecs", yes}});
    ASSERT_TRUE(flag.ok()) << yes << ": " << ErrorOf(flag);
    EXPECT_TRUE(flag->config.flags.plugin.pass_device_specs) << yes;
  }
  for (const char* no : {"0", "f", "F", "FALSE", "false", "False"}) {
    auto env = LoadText("version: v1\n", {{"FAIL_ON_INIT_ERROR", no}});
    ASSERT_TRUE(env.ok()) << no << ": " << ErrorOf(env);
    EXPECT_FALSE(env->config.flags.fail_on_init_error) << no;
  }
  for (const char* bad : {"yes", "no", "on", "tRUE", "2", ""}) {
    auto flag = LoadText("version: v1\n", {}, {{"flags.failOnInitError", bad}});
    EXPECT_THAT(ErrorOf(flag), ::testing::HasSubstr(StrCat(
                                   "flag --fail-on-init-error: invalid value \"", bad,
                                   "\" for flags.failOnInitError: expected a boolean (1, t, T")))
        << bad;
  }
  auto env = LoadText("version: v1\n", {{"GDRCOPY_ENABLED", "yes"}});
  EXPECT_THAT(ErrorOf(env), ::testing::HasSubstr("env GDRCOPY_ENABLED: invalid value \"yes\""));
  // A YAML file takes YAML's words, as NVIDIA's YAML reader does.
  auto file = LoadText(
      "version: v1\nflags:\n  failOnInitError: no\n  plugin:\n"
      "    passDeviceSpecs: yes\n");
  ASSERT_TRUE(file.ok()) << ErrorOf(file);
  EXPECT_FALSE(file->config.flags.fail_on_init_error);
  EXPECT_TRUE(file->config.flags.plugin.pass_device_specs);
}

TEST(NvidiaReadingTest, V020SettingsMapOntoTheAgentsOwn) {
  auto env = LoadText("version: v1\n", {{"SHARED_DEVICES_ALLOCATION_POLICY", "packed"},
                                        {"CDI_DISABLE_HOOKS", "update-ldcache"}});
  ASSERT_TRUE(env.ok()) << ErrorOf(env);
  EXPECT_EQ(env->config.sharing.time_slicing.allocation_policy, "packed");
  EXPECT_EQ(env->config.flags.plugin.cdi_disable_hooks, std::vector<std::string>{"update-ldcache"});
  auto file = LoadText(
      "version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n"
      "    kubeletSocket: /k/kubelet.sock\n    cdiDisableHooks: [create-symlinks]\n");
  ASSERT_TRUE(file.ok()) << ErrorOf(file);
  EXPECT_EQ(file->config.sharing.time_slicing.allocation_policy, "packed");
  EXPECT_EQ(file->config.kubelet.socket, "/k/kubelet.sock");
  EXPECT_EQ(file->config.flags.plugin.cdi_disable_hooks,
            std::vector<std::string>{"create-symlinks"});
  // A boolean is taken as all or none.
  auto all = LoadText("version: v1\n", {{"CDI_DISABLE_HOOKS", "true"}});
  ASSERT_TRUE(all.ok()) << ErrorOf(all);
  EXPECT_EQ(all->config.flags.plugin.cdi_disable_hooks, std::vector<std::string>{"all"});
  auto none = LoadText("version: v1\n", {{"CDI_DISABLE_HOOKS", "false"}});
  ASSERT_TRUE(none.ok()) << ErrorOf(none);
  EXPECT_TRUE(none->config.flags.plugin.cdi_disable_hooks.empty());
  EXPECT_THAT(ErrorOf(LoadText("version: v1\n", {{"SHARED_DEVICES_ALLOCATION_POLICY", "pack"}})),
              ::testing::HasSubstr("env SHARED_DEVICES_ALLOCATION_POLICY: invalid value "
                                   "\"pack\""));
  EXPECT_THAT(ErrorOf(LoadText("version: v1\n", {{"CDI_DISABLE_HOOKS", "update-ld-cache"}})),
              ::testing::HasSubstr("did you mean \"update-ldcache\"?"));
}

TEST(NvidiaReadingTest, EnvListsHaveNoDuplicates) {
  auto loaded = LoadText("version: v1\n", {{"DP_DISABLE_HEALTHCHECKS", "109,119,119"},
                                           {"DP_ENABLE_HEALTHCHECKS", "48,48"},
                                           {"IMEX_CHANNEL_IDS", "0,0"},
                                           {"DEVICE_LIST_STRATEGY", "envvar,cdi-cri,envvar"}});
  ASSERT_TRUE(loaded.ok()) << ErrorOf(loaded);
  EXPECT_EQ(loaded->config.health.ignored_xids, (std::vector<int>{13, 31, 43, 45, 68, 109, 119}));
  EXPECT_EQ(loaded->config.health.critical_xids, std::vector<int>{48});
  EXPECT_EQ(loaded->config.flags.plugin.device_list_strategy,
            (std::vector<std::string>{"envvar", "cdi-cri"}));
}

TEST(NvidiaReadingTest, RootsDefaultAsNvidiasDo) {
  // The dev root follows the driver root unless given.
  auto driver = LoadText("version: v1\n", {{"NVIDIA_DRIVER_ROOT", "/run/nvidia/driver"}});
  ASSERT_TRUE(driver.ok()) << ErrorOf(driver);
  EXPECT_EQ(driver->config.flags.nvidia_dev_root, "/run/nvidia/driver");
  auto both = LoadText("version: v1\n",
                       {{"NVIDIA_DRIVER_ROOT", "/run/nvidia/driver"}, {"NVIDIA_DEV_ROOT", "/"}});
  ASSERT_TRUE(both.ok()) << ErrorOf(both);
  EXPECT_EQ(both->config.flags.nvidia_dev_root, "/");
  // The container driver root is NVIDIA's chart's /driver-root where that
  // exists, and stays empty (the driver root itself) where it does not.
  auto probe = [](bool exists, std::map<std::string, std::string> env) {
    ConfigRequest req;
    req.env = Env(std::move(env));
    req.dir_exists = [exists](const std::string& p) { return exists && p == "/driver-root"; };
    return LoadConfig(req);
  };
  auto host = probe(false, {});
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->config.flags.plugin.container_driver_root, "");
  auto chart = probe(true, {{"NVIDIA_DRIVER_ROOT", "/run/nvidia/driver"}});
  ASSERT_TRUE(chart.ok());
  EXPECT_EQ(chart->config.flags.plugin.container_driver_root, "/driver-root");
  EXPECT_EQ(chart->config.flags.DriverRootHere(), "/driver-root");
  EXPECT_EQ(chart->config.flags.DevRootHere(), "/driver-root");
  EXPECT_THAT(ConfigReport(*chart), ::testing::HasSubstr("/driver-root exists (NVIDIA's Helm"));
  auto given = probe(true, {{"CONTAINER_DRIVER_ROOT", "/host"}});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->config.flags.plugin.container_driver_root, "/host");
}

TEST(NvidiaReadingTest, ImexRequiredIsAWarning) {
  auto file = LoadText("version: v1\nimex:\n  channelIDs: [0]\n  required: true\n");
  ASSERT_TRUE(file.ok()) << ErrorOf(file);
  EXPECT_THAT(Joined(file->warnings),
              ::testing::HasSubstr("config.yaml:4:13: imex.required is true, but IMEX channels "
                                   "are not provided by gpu-agent"));
  auto env = LoadText("version: v1\n", {{"IMEX_REQUIRED", "T"}});
  ASSERT_TRUE(env.ok()) << ErrorOf(env);
  EXPECT_THAT(Joined(env->warnings),
              ::testing::HasSubstr("env IMEX_REQUIRED=T: IMEX channels are not provided"));
  auto off = LoadText("version: v1\nimex:\n  required: false\n");
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->warnings.empty());
}

}  // namespace
}  // namespace gpu_agent
