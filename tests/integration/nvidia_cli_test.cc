// NVIDIA's command lines run gpu-agent unchanged: the real binary, started as
// `gpu-agent` or through a link named nvidia-device-plugin, with the flags and
// env of NVIDIA's own DaemonSets, registers with the kubelet simulator; every
// flag in the migration flag table (docs/moving-from-nvidia-flags.md) is
// accepted; NVIDIA's command-line grammar holds; bad input is a usage error.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <sstream>

#include "api_server_stub.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kGpu = "nvidia.com/gpu";

// <dir>/nvidia-device-plugin -> the built gpu-agent, as the image has it.
std::string NvidiaLink(const TempDir& dir) {
  const std::string link = dir.Join("nvidia-device-plugin");
  if (::access(link.c_str(), F_OK) != 0) {
    EXPECT_EQ(::symlink(BinaryPath().c_str(), link.c_str()), 0) << link;
  }
  return link;
}

struct DaemonSetCase {
  std::string name;
  bool nvidia_name;  // started through the nvidia-device-plugin link
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string config;  // NVIDIA config file content; its path replaces CONFIG in args
  std::string expect_log;
};

// Command lines of NVIDIA's static manifests and helm chart, v0.13 to v0.17.
// KUBELET_SOCKET (v0.15 and later) points them at the simulator; older
// versions used the same default path. The MIG strategy is none: the NVML
// fixtures have no node whose GPUs all share one MIG profile, which single
// needs.
std::vector<DaemonSetCase> DaemonSetCases() {
  return {
      {"static manifest: env only", true, {}, {{"FAIL_ON_INIT_ERROR", "false"}}, "", ""},
      {"static manifest v0.14: image entrypoint with args",
       false,
       {"--fail-on-init-error=false"},
       {},
       "",
       "no subcommand given"},
      {"bare binary", false, {}, {{"FAIL_ON_INIT_ERROR", "false"}}, "", "no subcommand given"},
      {"flags as args",
       true,
       {"--mig-strategy=single", "--pass-device-specs=true", "--fail-on-init-error=true",
        "--device-list-strategy=envvar", "--nvidia-driver-root=/"},
       {},
       "",
       "started as nvidia-device-plugin"},
      {"helm chart: config file",
       true,
       {"--config-file=CONFIG"},
       {},
       "version: v1\n"
       "flags:\n"
       "  migStrategy: none\n"
       "  failOnInitError: true\n"
       "  nvidiaDriverRoot: /\n"
       "  mpsRoot: /run/nvidia/mps\n"
       "  gdrcopyEnabled: false\n"
       "  plugin:\n"
       "    passDeviceSpecs: false\n"
       "    deviceListStrategy: [envvar]\n"
       "    deviceIDStrategy: uuid\n"
       "  gfd:\n"
       "    oneshot: false\n"
       "sharing:\n"
       "  timeSlicing:\n"
       "    resources:\n"
       "    - name: nvidia.com/gpu\n"
       "      replicas: 2\n",
       "flags.mpsRoot is accepted for compatibility"},
      {"helm chart: env",
       true,
       {},
       {{"MIG_STRATEGY", "none"},
        {"FAIL_ON_INIT_ERROR", "true"},
        {"NVIDIA_MIG_MONITOR_DEVICES", "all"},
        {"MPS_ROOT", "/run/nvidia/mps"},
        {"NVIDIA_DRIVER_ROOT", "/"},
        {"DRIVER_ROOT_CTR_PATH", "/"},
        {"DEVICE_LIST_STRATEGY", "envvar"},
        {"DEVICE_ID_STRATEGY", "uuid"},
        {"CDI_ANNOTATION_PREFIX", "cdi.k8s.io/"},
        {"NVIDIA_CDI_HOOK_PATH", "/usr/bin/nvidia-cdi-hook"},
        {"GDS_ENABLED", "false"},
        {"MOFED_ENABLED", "false"},
        {"IMEX_CHANNEL_IDS", ""},
        {"DEVICE_DISCOVERY_STRATEGY", "auto"}},
       "",
       "env MPS_ROOT=/run/nvidia/mps is ignored"},
  };
}

TEST(NvidiaCliTest, NvidiasDaemonSetCommandLinesRegister) {
  for (const DaemonSetCase& c : DaemonSetCases()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    ASSERT_TRUE(WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir.Join("sys")));
    KubeletSimulator sim(dir.path());
    ASSERT_TRUE(sim.Start());
    std::vector<std::string> argv = {c.nvidia_name ? NvidiaLink(dir) : BinaryPath()};
    const std::string config = c.config.empty() ? "" : dir.Write("config.yaml", c.config);
    for (const std::string& a : c.args) {
      argv.push_back(std::regex_replace(a, std::regex("CONFIG"), config));
    }
    std::map<std::string, std::string> env = FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml"));
    env["KUBELET_SOCKET"] = sim.socket();
    env["GPU_AGENT_SYSFS_ROOT"] = dir.Join("sys");
    for (const auto& [k, v] : c.env) env[k] = v;
    Subprocess agent(argv, env);
    ASSERT_TRUE(sim.WaitForRegistrations(1)) << agent.Stderr();
    EXPECT_EQ(sim.registration_requests().at(0).resource_name(), kGpu);
    const size_t want = c.config.empty() ? 8 : 16;  // time-slicing: 2 replicas each
    ASSERT_TRUE(sim.WaitForDevices(kGpu, [&](const std::vector<v1beta1::Device>& d) {
      return d.size() == want;
    })) << agent.Stderr();
    if (!c.expect_log.empty()) {
      EXPECT_NE(agent.Stderr().find(c.expect_log), std::string::npos) << agent.Stderr();
    }
    agent.Signal(SIGTERM);
    EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
  }
}

TEST(NvidiaCliTest, RunTakesNodeAsCapacityDoes) {
  for (const std::vector<std::string>& node_flag :
       {std::vector<std::string>{"--node", "gpu-node-1"}, {"--node-name", "gpu-node-1"}, {}}) {
    SCOPED_TRACE(node_flag.empty() ? "NODE_NAME" : node_flag[0]);
    ApiServerStub api;
    api.AddNode("gpu-node-1");
    std::vector<std::string> argv = {BinaryPath(), "run", "--mode", "static",
                                     "--proxy=" + api.url()};
    argv.insert(argv.end(), node_flag.begin(), node_flag.end());
    auto env = FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml"));
    if (node_flag.empty()) env["NODE_NAME"] = "gpu-node-1";
    Subprocess agent(argv, env);
    ASSERT_TRUE(WaitFor([&] { return api.Capacity("gpu-node-1", kGpu) == "8"; })) << agent.Stderr();
    agent.Signal(SIGTERM);
    EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
  }
  RunResult bad = RunAgent({"run", "--mode", "static", "--node", "Not_A_Node!"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("nodeName"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("Not_A_Node!"), std::string::npos) << bad.err;
}

TEST(NvidiaCliTest, CapacityHelpListsOnlyItsOptions) {
  for (const char* verb : {"set", "get", "remove"}) {
    SCOPED_TRACE(verb);
    RunResult r = RunAgent({"capacity", verb, "--help"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* wanted : {"--node", "--proxy", "--server", "--kubeconfig", "--config"}) {
      EXPECT_NE(r.out.find(wanted), std::string::npos) << wanted << "\n" << r.out;
    }
    for (const char* unwanted : {"--pass-device-specs", "--kubelet-socket",
                                 "--device-list-strategy", "--mode ", "--cdi-vendor", "--endpoint",
                                 "--gdrcopy-enabled", "--resync-interval", "--metrics-address"}) {
      EXPECT_EQ(r.out.find(unwanted), std::string::npos) << unwanted << "\n" << r.out;
    }
    const bool discovers = std::string(verb) == "set";
    EXPECT_EQ(r.out.find("--mig-strategy") != std::string::npos, discovers) << r.out;
  }
  RunResult refused = RunAgent({"capacity", "get", "--node", "n1", "--pass-device-specs"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("--pass-device-specs"), std::string::npos) << refused.err;
}

// Each flag under the heading of the modes that read it: DRA mode reads
// the CDI and device-node settings as plugin mode does, and the node name
// and API server connection as static mode does.
TEST(NvidiaCliTest, RunHelpGroupsOptionsByMode) {
  RunResult r = RunAgent({"run", "--help"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::pair<std::string, std::string>> headings = {
      {"common", "\nCommon:"},
      {"containers", "\nPlugin and DRA modes: the CDI spec and device nodes:"},
      {"plugin", "\nPlugin mode:"},
      {"dra", "\nDRA mode:"},
      {"api", "\nStatic and DRA modes: the node and the API server:"},
      {"static", "\nStatic mode:"},
      {"ignored", "\nNVIDIA compatibility (accepted, ignored):"}};
  std::vector<std::pair<size_t, std::string>> at;
  for (const auto& [name, heading] : headings) {
    const size_t pos = r.out.find(heading);
    ASSERT_NE(pos, std::string::npos) << heading << "\n" << r.out;
    if (!at.empty()) {
      EXPECT_GT(pos, at.back().first) << heading << "\n" << r.out;
    }
    at.emplace_back(pos, name);
  }
  auto section_of = [&](const std::string& flag) {
    const size_t pos = r.out.find("\n  " + flag);
    if (pos == std::string::npos) return std::string("missing");
    std::string section = "other";
    for (const auto& [start, name] : at) {
      if (pos > start) section = name;
    }
    return section;
  };
  EXPECT_EQ(section_of("--mig-strategy"), "common");
  EXPECT_EQ(section_of("--config,--config-file"), "common");
  EXPECT_EQ(section_of("--cdi-spec-dir"), "containers");
  EXPECT_EQ(section_of("--dev-root,--nvidia-dev-root"), "containers");
  EXPECT_EQ(section_of("--nvidia-cdi-hook-path,--nvidia-ctk-path"), "containers");
  EXPECT_EQ(section_of("--proc-root"), "containers");
  EXPECT_EQ(section_of("--pass-device-specs"), "plugin");
  EXPECT_EQ(section_of("--kubelet-socket"), "plugin");
  EXPECT_EQ(section_of("--dra-driver-name"), "dra");
  EXPECT_EQ(section_of("--node-name,--node"), "api");
  EXPECT_EQ(section_of("--kubeconfig"), "api");
  EXPECT_EQ(section_of("--proxy"), "api");
  EXPECT_EQ(section_of("--resync-interval"), "static");
  EXPECT_EQ(section_of("--gdrcopy-enabled"), "ignored");
  EXPECT_EQ(section_of("--imex-channel-ids"), "ignored");
  // No static-only words on what DRA mode reads too.
  EXPECT_EQ(r.out.find("this node's name (static mode)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("where plugin mode writes the CDI spec"), std::string::npos) << r.out;
}

// One row of the flag table in docs/moving-from-nvidia-flags.md.
struct FlagRow {
  std::vector<std::string> flags;
  std::vector<std::string> envs;
  std::string example;
  std::string effect;  // a setting key, or "ignored: ..."
};

std::vector<FlagRow> FlagTable() {
  const std::string readme = ReadFile(SourceDir() + "/docs/moving-from-nvidia-flags.md");
  const size_t header = readme.find("| NVIDIA flag | env | example | gpu-agent |");
  EXPECT_NE(header, std::string::npos) << "docs/moving-from-nvidia-flags.md lost its flag table";
  std::vector<FlagRow> rows;
  if (header == std::string::npos) return rows;
  std::istringstream lines(readme.substr(header));
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // |---|
  const std::regex tick("`([^`]*)`");
  while (std::getline(lines, line)) {
    const size_t first = line.find('|');
    if (first == std::string::npos) break;
    std::vector<std::string> cells;
    std::string rest = line.substr(first + 1);
    for (size_t bar; (bar = rest.find('|')) != std::string::npos; rest = rest.substr(bar + 1)) {
      cells.push_back(rest.substr(0, bar));
    }
    if (cells.size() != 4) break;
    FlagRow row;
    auto ticked = [&](const std::string& cell) {
      std::vector<std::string> out;
      for (std::sregex_iterator it(cell.begin(), cell.end(), tick), end; it != end; ++it) {
        out.push_back((*it)[1]);
      }
      return out;
    };
    for (const std::string& f : ticked(cells[0])) row.flags.push_back(f);
    row.envs = ticked(cells[1]);
    const std::vector<std::string> example = ticked(cells[2]);
    row.example = example.empty() ? "" : example[0];
    row.effect = std::string(cells[3].substr(cells[3].find_first_not_of(' ')));
    rows.push_back(row);
  }
  return rows;
}

TEST(NvidiaCliTest, EveryFlagAndEnvInTheFlagTableIsAccepted) {
  const std::vector<FlagRow> rows = FlagTable();
  ASSERT_GE(rows.size(), 22u);
  const RunResult help = RunAgent({"run", "--help"});
  ASSERT_EQ(help.code, 0) << help.err;
  const RunResult defaults = RunAgent({"config"});
  ASSERT_EQ(defaults.code, 0) << defaults.err;
  std::set<std::string> seen;
  TempDir dir;
  const std::string file = dir.Write("nvidia.yaml", "version: v1\n");
  const EnvOverrides clean = AgentEnv();
  for (const FlagRow& row : rows) {
    const std::string value = row.example == "FILE" ? file : row.example;
    const bool ignored = row.effect.rfind("ignored", 0) == 0;
    // A setting row names a key `config` prints; an ignored one says why.
    if (!ignored && row.example != "FILE") {
      const std::string leaf = row.effect.substr(row.effect.rfind('.') + 1);
      EXPECT_NE(defaults.out.find(" " + leaf.substr(0, leaf.find('`')) + ": "), std::string::npos)
          << row.effect << " is not in `gpu-agent config`";
    }
    for (const std::string& flag : row.flags) {
      SCOPED_TRACE(flag);
      ASSERT_EQ(flag.rfind("--", 0), 0u);
      EXPECT_NE(help.out.find(flag), std::string::npos) << flag << " is not in `run --help`";
      EXPECT_TRUE(seen.insert(flag).second) << "listed twice";
      RunResult r = RunAgent({"config", flag + "=" + value}, clean);
      ASSERT_EQ(r.code, 0) << r.err;
      if (ignored) {
        EXPECT_NE(r.out.find("# note: "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(" is ignored: "), std::string::npos) << r.out;
      } else if (row.example != "FILE") {
        EXPECT_NE(r.out.find("# flag --"), std::string::npos) << r.out;
      }
      // Started under NVIDIA's name too (as `run`): parsed, then stopped by a
      // usage error that comes after every flag is read.
      TempDir link_dir;
      Subprocess p({NvidiaLink(link_dir), flag + "=" + value, "--mode", "neither"}, clean);
      EXPECT_EQ(p.Wait(), 2) << p.Stderr();
      EXPECT_NE(p.Stderr().find("invalid value \"neither\""), std::string::npos) << p.Stderr();
    }
    for (const std::string& env_name : row.envs) {
      SCOPED_TRACE(env_name);
      EXPECT_TRUE(seen.insert(env_name).second) << "listed twice";
      std::map<std::string, std::string> env = clean;
      env[env_name] = value;
      RunResult r = RunAgent({"config"}, env);
      ASSERT_EQ(r.code, 0) << r.err;
      if (ignored) {
        EXPECT_NE(r.out.find(" is ignored: "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(env_name), std::string::npos) << r.out;
      } else if (row.example != "FILE") {
        EXPECT_NE(r.out.find("# env " + env_name), std::string::npos) << r.out;
      }
    }
  }
  // NVIDIA's flag names as the source of v0.13 to v0.20 lists them.
  for (const char* name : {"--shared-devices-allocation-policy",
                           "--cdi-disable-hooks",
                           "--mig-strategy",
                           "--fail-on-init-error",
                           "--nvidia-driver-root",
                           "--driver-root",
                           "--dev-root",
                           "--nvidia-dev-root",
                           "--pass-device-specs",
                           "--device-list-strategy",
                           "--device-id-strategy",
                           "--gdrcopy-enabled",
                           "--gds-enabled",
                           "--mofed-enabled",
                           "--kubelet-socket",
                           "--config-file",
                           "--cdi-annotation-prefix",
                           "--nvidia-cdi-hook-path",
                           "--nvidia-ctk-path",
                           "--driver-root-ctr-path",
                           "--container-driver-root",
                           "--mps-root",
                           "--device-discovery-strategy",
                           "--imex-channel-ids",
                           "--imex-required",
                           "--cdi-feature-flags"}) {
    EXPECT_EQ(seen.count(name), 1u) << name << " missing from the flag table";
  }
}

TEST(NvidiaCliTest, BadInputIsAUsageErrorNamingTheFlag) {
  struct Case {
    bool nvidia_name;
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string expect;
  } cases[] = {
      {true, {"--no-such-flag"}, {}, "--no-such-flag"},
      {false, {"--no-such-flag"}, {}, "--no-such-flag"},
      {true, {"--mig-strategy=mixd"}, {}, "flag --mig-strategy: invalid value \"mixd\""},
      {true, {"--fail-on-init-error=maybe"}, {}, "flag --fail-on-init-error: invalid value"},
      {true, {"--device-list-strategy=cdi"}, {}, "flag --device-list-strategy: invalid value"},
      {true, {"--device-id-strategy=serial"}, {}, "flag --device-id-strategy: invalid value"},
      {true, {"--device-discovery-strategy=tegr"}, {}, "did you mean \"tegra\"?"},
      {true, {"--imex-channel-ids=0,one"}, {}, "flag --imex-channel-ids: invalid value \"one\""},
      {true, {"--imex-required=perhaps"}, {}, "flag --imex-required: invalid value"},
      {true, {}, {{"MIG_STRATEGY", "all"}}, "env MIG_STRATEGY: invalid value \"all\""},
      {true, {}, {{"GDRCOPY_ENABLED", "yes please"}}, "env GDRCOPY_ENABLED: invalid value"},
      {true, {}, {{"IMEX_CHANNEL_IDS", "-1"}}, "env IMEX_CHANNEL_IDS: invalid value \"-1\""},
      {true, {}, {{"DEVICE_DISCOVERY_STRATEGY", "vfio"}}, "env DEVICE_DISCOVERY_STRATEGY"},
      {true, {"--config-file=/nonexistent/config.yaml"}, {}, "/nonexistent/config.yaml"},
      {true, {"--mig-strategy"}, {}, "--mig-strategy"},
  };
  TempDir dir;
  for (const Case& c : cases) {
    std::vector<std::string> argv = {c.nvidia_name ? NvidiaLink(dir) : BinaryPath()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Subprocess p(argv, AgentEnv(c.env));
    EXPECT_EQ(p.Wait(), 2) << c.expect << "\n" << p.Stderr();
    EXPECT_NE(p.Stderr().find(c.expect), std::string::npos) << p.Stderr();
  }
}

// urfave/cli over Go's flag package: list flags accumulate, others keep the
// last value, one dash is as good as two, booleans are strconv.ParseBool's.
TEST(NvidiaCliTest, NvidiasCommandLineGrammar) {
  const EnvOverrides clean = AgentEnv();
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string expect;  // a line of `config`'s output
  } cases[] = {
      {{"--device-list-strategy", "envvar", "--device-list-strategy", "cdi-cri"},
       {},
       "deviceListStrategy: [envvar, cdi-cri]"},
      {{"--device-list-strategy=envvar,volume-mounts", "--device-list-strategy=cdi-cri"},
       {},
       "deviceListStrategy: [envvar, volume-mounts, cdi-cri]"},
      {{"--mig-strategy=single", "--mig-strategy=mixed"}, {}, "migStrategy: mixed"},
      {{"-mig-strategy=single"}, {}, "migStrategy: single"},
      {{"-mig-strategy", "mixed"}, {}, "migStrategy: mixed"},
      {{"-pass-device-specs"}, {}, "passDeviceSpecs: true"},
      {{"-fail-on-init-error=F"}, {}, "failOnInitError: false"},
      {{"--pass-device-specs=T"}, {}, "passDeviceSpecs: true"},
      {{"--pass-device-specs=1"}, {}, "passDeviceSpecs: true"},
      {{}, {{"PASS_DEVICE_SPECS", "True"}}, "passDeviceSpecs: true"},
      {{}, {{"FAIL_ON_INIT_ERROR", "FALSE"}}, "failOnInitError: false"},
      {{"--shared-devices-allocation-policy=packed"}, {}, "sharedDevicesAllocationPolicy: packed"},
      {{}, {{"SHARED_DEVICES_ALLOCATION_POLICY", "packed"}}, "allocationPolicy: packed"},
      {{"--cdi-disable-hooks=update-ldcache", "--cdi-disable-hooks=create-symlinks"},
       {},
       "cdiDisableHooks: [update-ldcache, create-symlinks]"},
      {{}, {{"DP_DISABLE_HEALTHCHECKS", "109,119"}}, "ignoredXids: [13, 31, 43, 45, 68, 109, 119]"},
      {{"--imex-channel-ids=0", "--imex-channel-ids=1"}, {}, "--imex-channel-ids=0,1 is ignored"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"config"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    std::map<std::string, std::string> env = clean;
    for (const auto& [k, v] : c.env) env[k] = v;
    RunResult r = RunAgent(args, env);
    SCOPED_TRACE(c.expect);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << r.out;
  }
  // The same under NVIDIA's name, as `run`: a single-dash flag and a
  // repeated list flag parse, then a bad mode stops it after every flag.
  TempDir dir;
  Subprocess p({NvidiaLink(dir), "-mig-strategy=single", "--device-list-strategy", "envvar",
                "--device-list-strategy", "cdi-cri", "-mode", "neither"},
               clean);
  EXPECT_EQ(p.Wait(), 2) << p.Stderr();
  EXPECT_NE(p.Stderr().find("invalid value \"neither\""), std::string::npos) << p.Stderr();
  // What Go refuses is refused, naming the flag or env var.
  struct Bad {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string expect;
  } bad[] = {
      {{"--fail-on-init-error=yes"},
       {},
       "flag --fail-on-init-error: invalid value \"yes\" for flags.failOnInitError: expected a "
       "boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)"},
      {{"-pass-device-specs=on"}, {}, "flag --pass-device-specs: invalid value \"on\""},
      {{}, {{"PASS_DEVICE_SPECS", "yes"}}, "env PASS_DEVICE_SPECS: invalid value \"yes\""},
      {{}, {{"RESTART_ON_DEVICE_UNHEALTHY", "yes"}}, "env RESTART_ON_DEVICE_UNHEALTHY: invalid"},
      {{"--shared-devices-allocation-policy=spread"},
       {},
       "flag --shared-devices-allocation-policy: invalid value \"spread\""},
      {{"--cdi-disable-hooks=ldcache"}, {}, "flag --cdi-disable-hooks: invalid value \"ldcache\""},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> args = {"config"};
    args.insert(args.end(), b.args.begin(), b.args.end());
    std::map<std::string, std::string> env = clean;
    for (const auto& [k, v] : b.env) env[k] = v;
    RunResult r = RunAgent(args, env);
    EXPECT_EQ(r.code, 2) << b.expect << "\n" << r.err;
    EXPECT_NE(r.err.find(b.expect), std::string::npos) << r.err;
  }
}

// A ConfigMap that ran under NVIDIA's plugin runs here, with NVIDIA's result
// and warnings; `config --strict` is the linter that refuses unknown keys.
TEST(NvidiaCliTest, NvidiasConfigFilesRunWithWarnings) {
  const EnvOverrides clean = AgentEnv();
  const std::string dir = SourceDir() + "/tests/fixtures/nvidia";
  for (const char* name :
       {"time-slicing.yaml", "time-slicing-devices-rename.yaml", "mig.yaml",
        "device-list-strategies.yaml", "helm-config-map-default.yaml", "empty.yaml"}) {
    SCOPED_TRACE(name);
    RunResult r = RunAgent({"config", "--config", dir + "/" + name}, clean);
    EXPECT_EQ(r.code, 0) << r.err;
  }
  RunResult renamed =
      RunAgent({"config", "--config", dir + "/time-slicing-devices-rename.yaml"}, clean);
  EXPECT_NE(renamed.out.find("# warning: "), std::string::npos) << renamed.out;
  EXPECT_NE(renamed.out.find("honor: [devices]"), std::string::npos) << renamed.out;
  EXPECT_NE(renamed.out.find("devices: [all]"), std::string::npos) << renamed.out;
  EXPECT_EQ(renamed.out.find("rename: "), std::string::npos) << renamed.out;
  TempDir tmp;
  const std::string typo = tmp.Write("typo.yaml", "version: v1\nflags:\n  migStrategi: single\n");
  RunResult warned = RunAgent({"config", "--config", typo}, clean);
  EXPECT_EQ(warned.code, 0) << warned.err;
  EXPECT_NE(warned.out.find("# warning: " + typo +
                            ":3:3: unknown key \"migStrategi\" in flags; did you mean "
                            "\"migStrategy\"?"),
            std::string::npos)
      << warned.out;
  RunResult strict = RunAgent({"config", "--strict", "--config", typo}, clean);
  EXPECT_EQ(strict.code, 2) << strict.err;
  EXPECT_NE(strict.err.find("did you mean \"migStrategy\"?"), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find("--strict"), std::string::npos) << strict.err;
  RunResult imex = RunAgent({"config", "--imex-required"}, clean);
  EXPECT_EQ(imex.code, 0) << imex.err;
  EXPECT_NE(imex.out.find("# warning: flag --imex-required=true: IMEX channels are not provided"),
            std::string::npos)
      << imex.out;
}

TEST(NvidiaCliTest, VersionAndHelpUnderBothNames) {
  TempDir dir;
  for (const std::string& program : {BinaryPath(), NvidiaLink(dir)}) {
    Subprocess v({program, "--version"}, AgentEnv());
    EXPECT_EQ(v.Wait(), 0);
    EXPECT_EQ(v.Stdout().rfind("gpu-agent ", 0), 0u) << v.Stdout();
  }
  Subprocess top({BinaryPath(), "--help"}, AgentEnv());
  EXPECT_EQ(top.Wait(), 0);
  EXPECT_NE(top.Stdout().find("SUBCOMMAND"), std::string::npos) << top.Stdout();
  // Under NVIDIA's name the program is `run`: its help is run's.
  Subprocess nvidia({NvidiaLink(dir), "--help"}, AgentEnv());
  EXPECT_EQ(nvidia.Wait(), 0);
  EXPECT_NE(nvidia.Stdout().find("Plugin mode:"), std::string::npos) << nvidia.Stdout();
}

TEST(NvidiaCliTest, ImageAndInstallProvideTheNvidiaName) {
  const std::string dockerfile = ReadFile(SourceDir() + "/Dockerfile");
  EXPECT_NE(dockerfile.find("ln -s gpu-agent /usr/bin/nvidia-device-plugin"), std::string::npos);
  const std::string cmake = ReadFile(SourceDir() + "/CMakeLists.txt");
  EXPECT_NE(cmake.find("file(CREATE_LINK gpu-agent"), std::string::npos);
  EXPECT_NE(cmake.find("/nvidia-device-plugin"), std::string::npos);
}

}  // namespace
}  // namespace gpu_agent::testing
