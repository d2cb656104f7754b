// The real gpu-agent binary as a subprocess: subcommands, exit codes, and
// what it prints for bad input.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>

#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

TEST(CliTest, HelpOnEverySubcommand) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"},
                                        {"run", "--help"},
                                        {"devices", "--help"},
                                        {"health", "--help"},
                                        {"config", "--help"},
                                        {"version", "--help"}}) {
    RunResult r = RunAgent(args);
    EXPECT_EQ(r.code, 0) << args[0] << r.err;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << r.out;
  }
  RunResult run_help = RunAgent({"run", "--help"});
  EXPECT_NE(run_help.out.find("--mig-strategy"), std::string::npos);
  EXPECT_NE(run_help.out.find("env MIG_STRATEGY"), std::string::npos);
}

TEST(CliTest, Version) {
  RunResult r = RunAgent({"version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("gpu-agent ", 0), 0u) << r.out;
}

TEST(CliTest, UsageErrorsExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {{"frobnicate"}, "unknown subcommand \"frobnicate\""},
      {{"devcies"}, "did you mean \"devices\"?"},
      {{"run", "--no-such-flag"}, "--no-such-flag"},
      {{"run", "--mig-strategy", "a", "--mig-strategy", "b"}, "--mig-strategy"},
      {{"run", "--config", "a", "--config-file", "b"}, "--config"},
      {{"run", "--proxy", "--server", "https://x"}, "excludes"},
      {{"run", "--insecure-skip-tls-verify", "--certificate-authority", "ca.pem"}, "excludes"},
      {{"devices", "-o", "xml"}, "xml"},
  };
  for (const Case& c : cases) {
    RunResult r = RunAgent(c.args);
    EXPECT_EQ(r.code, 2) << c.expect << "\n" << r.err;
    EXPECT_NE((r.out + r.err).find(c.expect), std::string::npos) << r.err;
  }
}

TEST(CliTest, ConfigErrorsExitTwoWithPosition) {
  TempDir dir;
  const std::string path = dir.Write("c.yaml", "version: v1\nflags:\n  migStrategy: singel\n");
  RunResult r = RunAgent({"config", "--config", path});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path + ":3:16: invalid value \"singel\""), std::string::npos) << r.err;
  RunResult env = RunAgent({"config"}, {{"CONFIG_FILE", "/nonexistent.yaml"}});
  EXPECT_EQ(env.code, 2);
  EXPECT_NE(env.err.find("named by env CONFIG_FILE"), std::string::npos) << env.err;
  RunResult flag = RunAgent({"run", "--mig-strategy", "lots"});
  EXPECT_EQ(flag.code, 2);
  EXPECT_NE(flag.err.find("flag --mig-strategy: invalid value \"lots\""), std::string::npos)
      << flag.err;
}

TEST(CliTest, ConfigShowsWhereEachValueCameFrom) {
  TempDir dir;
  const std::string path = dir.Write("c.yaml", "version: v1\nflags:\n  migStrategy: single\n");
  RunResult r = RunAgent({"config", "--config", path, "--device-id-strategy", "index"},
                         {{"PASS_DEVICE_SPECS", "true"}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("migStrategy: single"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# file " + path + ":3:3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deviceIDStrategy: index"), std::string::npos);
  EXPECT_NE(r.out.find("# flag --device-id-strategy"), std::string::npos);
  EXPECT_NE(r.out.find("passDeviceSpecs: true"), std::string::npos);
  EXPECT_NE(r.out.find("# env PASS_DEVICE_SPECS"), std::string::npos);
  EXPECT_NE(r.out.find("resourceName: nvidia.com/gpu"), std::string::npos);
}

TEST(CliTest, DevicesJsonMatchesTheFixture) {
  TempDir sysfs;
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("8-gpu-pcie.yaml"), sysfs.path()));
  RunResult r = RunAgent({"devices", "-o", "json", "--sysfs-root", sysfs.path()},
                         FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml")));
  ASSERT_EQ(r.code, 0) << r.err;
  rapidjson::Document doc;
  doc.Parse(r.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << r.out;
  ASSERT_TRUE(doc.IsArray());
  ASSERT_EQ(doc.Size(), 8u);
  const auto& g = doc[6];
  EXPECT_EQ(g["index"].GetInt(), 6);
  EXPECT_STREQ(g["name"].GetString(), "NVIDIA L40S");
  EXPECT_EQ(g["memoryMiB"].GetInt(), 46068);
  EXPECT_EQ(g["minor"].GetInt(), 6);
  EXPECT_STREQ(g["pciBusId"].GetString(), "00000000:B1:00.0");
  EXPECT_EQ(g["numaNode"].GetInt(), 1);
  EXPECT_EQ(std::string(g["uuid"].GetString()).rfind("GPU-", 0), 0u);
  // The fixture's UUID, read back through NVML.
  EXPECT_NE(ReadFile(FixturePath("8-gpu-pcie.yaml")).find(g["uuid"].GetString()),
            std::string::npos);
}

// Captures of real drivers (scripts/gpu-check.sh) beside what `gpu-agent
// devices` printed on them: the stand-in loaded with the capture prints it
// again, so the stand-in answers as that driver did.
TEST(CliTest, DevicesOnTheStandInMatchWhatARealDriverGave) {
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FixturePath(""))) {
    const std::string path = entry.path().string();
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("real-") || !name.ends_with(".yaml")) continue;
    const std::string want = path.substr(0, path.size() - 5) + ".devices.json";
    ASSERT_TRUE(std::filesystem::exists(want)) << "no " << want << " beside " << name;
    TempDir sysfs;
    ASSERT_TRUE(WriteFixtureSysfs(path, sysfs.path()));
    RunResult r =
        RunAgent({"devices", "-o", "json", "--sysfs-root", sysfs.path()}, FakeNvmlEnv(path));
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, ReadFile(want)) << name;
    ++compared;
  }
  EXPECT_GE(compared, 1) << "no real-driver capture in " << FixturePath("");
}

// The same captures beside the health report the driver gave: the stand-in
// judges every check as the driver did (each check's state, and its value
// but for the temperature and clock events, which move by the second).
TEST(CliTest, HealthOnTheStandInJudgesAsTheRealDriverDid) {
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FixturePath(""))) {
    const std::string path = entry.path().string();
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("real-") || !name.ends_with(".yaml")) continue;
    const std::string report = path.substr(0, path.size() - 5) + ".health.json";
    if (!std::filesystem::exists(report)) continue;
    TempDir sysfs;
    ASSERT_TRUE(WriteFixtureSysfs(path, sysfs.path()));
    RunResult r =
        RunAgent({"health", "-o", "json", "--sysfs-root", sysfs.path()}, FakeNvmlEnv(path));
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    rapidjson::Document got, want;
    got.Parse(r.out.c_str());
    want.Parse(ReadFile(report).c_str());
    ASSERT_FALSE(got.HasParseError()) << r.out;
    ASSERT_FALSE(want.HasParseError()) << report;
    ASSERT_EQ(got["gpus"].Size(), want["gpus"].Size()) << name;
    for (rapidjson::SizeType g = 0; g < want["gpus"].Size(); ++g) {
      const auto& wc = want["gpus"][g]["checks"];
      const auto& gc = got["gpus"][g]["checks"];
      ASSERT_EQ(gc.Size(), wc.Size()) << name;
      for (rapidjson::SizeType c = 0; c < wc.Size(); ++c) {
        const std::string check = wc[c]["check"].GetString();
        EXPECT_STREQ(gc[c]["check"].GetString(), check.c_str()) << name;
        EXPECT_STREQ(gc[c]["state"].GetString(), wc[c]["state"].GetString())
            << name << " GPU " << g << " " << check;
        if (check != "temperature" && check != "clockEvents") {
          EXPECT_STREQ(gc[c]["value"].GetString(), wc[c]["value"].GetString())
              << name << " GPU " << g << " " << check;
        }
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 1) << "no real-driver health report in " << FixturePath("");
}

TEST(CliTest, DevicesShowMigDevicesWithTheirProfiles) {
  RunResult table = RunAgent({"devices"}, FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("GPU 0 MIG 1: MIG-88046736-7ede-57ab-bf0a-d906907fb941 (1g.10gb, 9856 "
                           "MiB, GI 2 CI 0)"),
            std::string::npos)
      << table.out;
  RunResult json = RunAgent({"devices", "-o", "json"}, FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  ASSERT_EQ(json.code, 0) << json.err;
  rapidjson::Document doc;
  doc.Parse(json.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json.out;
  ASSERT_EQ(doc[0]["migDevices"].Size(), 3u);
  EXPECT_STREQ(doc[0]["migDevices"][0]["profile"].GetString(), "2g.20gb");
  EXPECT_STREQ(doc[0]["migDevices"][2]["profile"].GetString(), "1g.10gb");
}

TEST(CliTest, DevicesTableAndYaml) {
  RunResult table = RunAgent({"devices"}, FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml")));
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("8 GPU(s)"), std::string::npos);
  EXPECT_NE(table.out.find("Tesla V100-SXM2-32GB"), std::string::npos);
  EXPECT_NE(table.out.find("GPU0  X\tNV1\tNV1\tNV2\tNV2\tSYS"), std::string::npos) << table.out;
  RunResult yaml = RunAgent({"devices", "-o", "yaml"}, FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  ASSERT_EQ(yaml.code, 0);
  EXPECT_NE(yaml.out.find("name: NVIDIA A100-PCIE-40GB"), std::string::npos) << yaml.out;
}

TEST(CliTest, NoNvmlLibrary) {
  TempDir root;
  RunResult r =
      RunAgent({"devices", "--nvidia-driver-root", root.path()}, {{"LD_LIBRARY_PATH", kUnset}});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("libnvidia-ml.so.1 not found; looked in:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(root.path() + "/usr/lib64/libnvidia-ml.so.1"), std::string::npos);
}

TEST(CliTest, RunWithFailingNvmlHonoursFailOnInitError) {
  TempDir dir;
  const std::string fixture = dir.Write("f.yaml", "initError: 9\n");
  RunResult fail = RunAgent({"run", "--fail-on-init-error=true"}, FakeNvmlEnv(fixture));
  EXPECT_EQ(fail.code, 1);
  EXPECT_NE(fail.err.find("Driver Not Loaded (9)"), std::string::npos) << fail.err;
  EXPECT_NE(fail.err.find("failOnInitError is true"), std::string::npos) << fail.err;
}

TEST(CliTest, UnreadableConfigFile) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string path = dir.Write("c.yaml", "version: v1\n");
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  std::vector<std::string> argv = {BinaryPath(), "config", "--config", path};
  if (::geteuid() == 0) {
    // Root reads any file: ask as nobody.
    argv.insert(argv.begin(),
                {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  } else {
    ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  }
  Subprocess p(argv, AgentEnv());
  EXPECT_EQ(p.Wait(), 2);
  EXPECT_NE(p.Stderr().find("cannot read config file \"" + path +
                            "\" (named by flag --config): Permission denied"),
            std::string::npos)
      << p.Stderr();
}

TEST(CliTest, MalformedFixtureIsReportedNotACrash) {
  TempDir dir;
  const std::string fixture = dir.Write("f.yaml", "gpus:\n  - uuid: GPU-1\n    pciBusId: bad\n");
  RunResult r = RunAgent({"devices"}, FakeNvmlEnv(fixture));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("f.yaml:3:15: pciBusId must look like"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("NVML initialisation failed"), std::string::npos) << r.err;
}

// What an operator meets in the first hour with the tool.
TEST(FirstHourTest, EachSubcommandsHelpListsOnlyTheFlagsItReads) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> listed;
    std::vector<std::string> absent;
  } cases[] = {
      {{"devices", "--help"},
       {"--include-devices", "--nvidia-driver-root", "--output"},
       {"--kubelet-socket", "--pass-device-specs", "--resync-interval", "--gdrcopy-enabled",
        "--server", "--cdi-vendor"}},
      {{"cdi", "generate", "--help"},
       {"--cdi-vendor", "--dev-root", "--nvidia-cdi-hook-path", "--cdi-disable-hooks",
        "--output-file"},
       {"--kubelet-socket", "--pass-device-specs", "--server", "--metrics-address"}},
      {{"labels", "--help"},
       {"--mig-strategy", "--include-devices"},
       {"--kubelet-socket", "--server", "--metrics-address", "--cdi-vendor"}},
      {{"labels", "apply", "--help"}, {"--server", "--kubeconfig", "--node"}, {"--kubelet-socket"}},
  };
  for (const Case& c : cases) {
    RunResult r = RunAgent(c.args);
    ASSERT_EQ(r.code, 0) << r.err;
    for (const std::string& f : c.listed) {
      EXPECT_NE(r.out.find(f), std::string::npos) << c.args[0] << " lacks " << f << "\n" << r.out;
    }
    for (const std::string& f : c.absent) {
      EXPECT_EQ(r.out.find(f), std::string::npos) << c.args[0] << " lists " << f << "\n" << r.out;
    }
  }
}

TEST(FirstHourTest, DevicesHonoursTheSelection) {
  const auto env = FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml"));
  RunResult all = RunAgent({"devices", "-o", "json"}, env);
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.err.find("selects"), std::string::npos) << all.err;
  RunResult some = RunAgent({"devices", "-o", "json", "--include-devices", "index:3,index:5"}, env);
  ASSERT_EQ(some.code, 0) << some.err;
  EXPECT_NE(some.err.find("showing the 2 of 8 GPUs devices.* selects"), std::string::npos)
      << some.err;
  rapidjson::Document d;
  d.Parse(some.out.c_str());
  ASSERT_FALSE(d.HasParseError()) << some.out;
  ASSERT_TRUE(d.IsArray()) << some.out;
  ASSERT_EQ(d.Size(), 2u) << some.out;
  EXPECT_EQ(d[0]["index"].GetInt(), 3);
  EXPECT_EQ(d[1]["index"].GetInt(), 5);
  RunResult bad = RunAgent({"devices", "--include-devices", "gpu:1"}, env);
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("unknown selector kind"), std::string::npos) << bad.err;
}

TEST(FirstHourTest, DryRunNeedsNoServerAndTheErrorListsEveryPlaceLooked) {
  TempDir home;
  const EnvOverrides nowhere = {{"HOME", home.path()}};
  RunResult dry =
      RunAgent({"capacity", "set", "--node", "gpu-node-1", "--count", "4", "--dry-run"}, nowhere);
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("PATCH /api/v1/nodes/gpu-node-1/status"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("nvidia.com~1gpu"), std::string::npos) << dry.out;
  EXPECT_NE(dry.err.find("--dry-run without an API server"), std::string::npos) << dry.err;
  RunResult get = RunAgent({"capacity", "get", "--node", "gpu-node-1"}, nowhere);
  EXPECT_NE(get.code, 0);
  for (const std::string& place :
       {std::string("--kubeconfig"), std::string("KUBECONFIG"),
        home.path() + "/.kube/config (not there)", std::string("in-cluster"),
        std::string("--server"), std::string("--proxy")}) {
    EXPECT_NE(get.err.find(place), std::string::npos) << place << "\n" << get.err;
  }
  // ~/.kube/config is read when it is there, as kubectl reads it.
  home.Write(".kube/config",
             "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
             "    server: https://k8s.example:6443\ncontexts:\n- name: x\n"
             "  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
             "users:\n- name: u\n  user:\n    token: abc\n");
  RunResult found = RunAgent({"capacity", "get", "--node", "gpu-node-1", "--dry-run"}, nowhere);
  ASSERT_EQ(found.code, 0) << found.err;
  EXPECT_NE(found.out.find("GET https://k8s.example:6443/api/v1/nodes/gpu-node-1"),
            std::string::npos)
      << found.out;
}

// `config` builds the generation `run` builds: what run refuses, config
// refuses, with run's message and exit code, and prints nothing on stdout.
TEST(ConfigCommandTest, RefusesWhatRunRefuses) {
  const std::string why = "flags.migStrategy single needs every GPU in MIG mode, but GPU(s) 1";
  const auto env = FakeNvmlEnv(FixturePath("2-gpu-mig.yaml"));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"config", "--mig-strategy", "single"},
        std::vector<std::string>{"config", "--mig-strategy", "single", "--plan"},
        std::vector<std::string>{"config", "--mig-strategy", "single", "--strict"}}) {
    RunResult r = RunAgent(args, env);
    EXPECT_EQ(r.code, 2) << args.back();
    EXPECT_EQ(r.out, "") << args.back();
    EXPECT_NE(r.err.find("config error: the config cannot be served on this node: " + why),
              std::string::npos)
        << r.err;
  }
  RunResult run = RunAgent({"run", "--mode", "static", "--node-name", "n1", "--mig-strategy",
                            "single", "--proxy", "http://127.0.0.1:1"},
                           env);
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find(why), std::string::npos) << run.err;
}

// A machine without a driver (a CI job linting ConfigMaps): the config is
// printed, stderr says what was not checked, and the exit code is 0, with
// --strict too; --plan has nothing to plan there.
TEST(ConfigCommandTest, WithoutNvmlPrintsTheConfigAndSaysWhatWasSkipped) {
  TempDir root;
  const std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", "<unset>"}};
  for (bool strict : {false, true}) {
    std::vector<std::string> args = {"config", "--nvidia-driver-root", root.path(),
                                     "--mig-strategy", "single"};
    if (strict) args.push_back("--strict");
    RunResult r = RunAgent(args, env);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("migStrategy: single"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("NVML cannot be started (NVML library libnvidia-ml.so.1 not found"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("checks against this node's GPUs (devices, MIG strategy, sharing, CDI "
                         "spec) were skipped"),
              std::string::npos)
        << r.err;
  }
  RunResult plan = RunAgent({"config", "--plan", "--nvidia-driver-root", root.path()}, env);
  EXPECT_EQ(plan.code, 1);
  EXPECT_EQ(plan.out, "");
  EXPECT_NE(plan.err.find("config --plan: nothing to plan without NVML"), std::string::npos)
      << plan.err;
  // A file in error is still refused without NVML.
  const std::string bad = root.Write("bad.yaml", "version: v1\nflags:\n  migStrategy: some\n");
  RunResult file = RunAgent({"config", "--config", bad, "--nvidia-driver-root", root.path()}, env);
  EXPECT_EQ(file.code, 2) << file.err;
}

TEST(ConfigCommandTest, PlanPerResourceInTextJsonAndYaml) {
  const auto env = FakeNvmlEnv(FixturePath("2-gpu-mig.yaml"));
  const std::vector<std::string> args = {"config", "--plan", "--mig-strategy", "mixed"};
  RunResult text = RunAgent(args, env);
  ASSERT_EQ(text.code, 0) << text.err;
  for (const std::string& want :
       {std::string("(mode plugin)"), std::string("nvidia.com/mig-1g.10gb\n"),
        std::string("  endpoint: nvidia-mig-1g.10gb.sock\n  devices:  2 (2 healthy)\n"
                    "  units:    2 x 1 replica\n  ids:      "
                    "MIG-88046736-7ede-57ab-bf0a-d906907fb941 "
                    "MIG-0262095c-56cd-5b2e-903c-5f38b7f3d9b2\n"),
        std::string("nvidia.com/gpu\n  endpoint: nvidia-gpu.sock\n  devices:  1 (1 healthy)\n")}) {
    EXPECT_NE(text.out.find(want), std::string::npos) << want << "\n" << text.out;
  }
  std::vector<std::string> json_args = args;
  json_args.insert(json_args.end(), {"-o", "json"});
  RunResult json = RunAgent(json_args, env);
  ASSERT_EQ(json.code, 0) << json.err;
  rapidjson::Document d;
  d.Parse(json.out.c_str());
  ASSERT_FALSE(d.HasParseError()) << json.out;
  EXPECT_STREQ(d["mode"].GetString(), "plugin");
  ASSERT_EQ(d["resources"].Size(), 3u) << json.out;
  EXPECT_FALSE(d.HasMember("cdi")) << "no cdi-* strategy: no CDI spec";
  std::map<std::string, int> devices;
  for (const auto& r : d["resources"].GetArray()) {
    devices[r["name"].GetString()] = r["devices"].GetInt();
    EXPECT_EQ(r["healthy"].GetInt(), r["devices"].GetInt());
    EXPECT_EQ(static_cast<int>(r["ids"].Size()), r["devices"].GetInt());
  }
  EXPECT_EQ(devices, (std::map<std::string, int>{{"nvidia.com/gpu", 1},
                                                 {"nvidia.com/mig-1g.10gb", 2},
                                                 {"nvidia.com/mig-2g.20gb", 1}}));
  std::vector<std::string> yaml_args = args;
  yaml_args.insert(yaml_args.end(), {"-o", "yaml"});
  RunResult yaml = RunAgent(yaml_args, env);
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  const YAML::Node y = YAML::Load(yaml.out);
  ASSERT_EQ(y["resources"].size(), 3u) << yaml.out;
  EXPECT_EQ(y["resources"][0]["name"].as<std::string>(), d["resources"][0]["name"].GetString());
  EXPECT_EQ(y["resources"][0]["endpoint"].as<std::string>(),
            d["resources"][0]["endpoint"].GetString());
  // -o json is for --plan; the config itself is YAML.
  RunResult wrong = RunAgent({"config", "-o", "json"}, env);
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.err.find("-o json is for --plan"), std::string::npos) << wrong.err;
}

TEST(ConfigCommandTest, PlanCountsReplicasAndNoSocketInStaticMode) {
  TempDir dir;
  const std::string config = dir.Write(
      "ts.yaml",
      "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n"
      "        replicas: 3\n");
  const auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  RunResult plugin = RunAgent({"config", "--plan", "-o", "json", "--config", config}, env);
  ASSERT_EQ(plugin.code, 0) << plugin.err;
  rapidjson::Document d;
  d.Parse(plugin.out.c_str());
  ASSERT_FALSE(d.HasParseError()) << plugin.out;
  const auto& r = d["resources"][0];
  EXPECT_EQ(r["devices"].GetInt(), 3);
  EXPECT_EQ(r["units"].GetInt(), 1);
  EXPECT_EQ(r["replicas"].GetInt(), 3);
  EXPECT_STREQ(r["ids"][2].GetString(), "GPU-98c751c8-5401-57c6-bc37-497291358157::2");
  RunResult stat = RunAgent({"config", "--plan", "--config", config, "--mode", "static"}, env);
  ASSERT_EQ(stat.code, 0) << stat.err;
  EXPECT_NE(stat.out.find("(mode static)"), std::string::npos) << stat.out;
  EXPECT_EQ(stat.out.find("endpoint:"), std::string::npos) << stat.out;
  EXPECT_NE(stat.out.find("  devices:  3 (3 healthy)\n  units:    1 x 3 replicas\n"),
            std::string::npos)
      << stat.out;
}

// With a cdi-* strategy the plan names the spec's kind and devices: the
// names Allocate gives.
TEST(ConfigCommandTest, PlanNamesTheCdiDevices) {
  TempDir dir;
  ASSERT_TRUE(WriteFakeDriverRoot(dir.Join("driver"), "550.54.15"));
  WriteFakeDevRoot(dir.Join("devroot"), {0}, {}, ::geteuid() == 0);
  RunResult r = RunAgent({"config", "--plan", "--device-list-strategy", "cdi-cri",
                          "--nvidia-driver-root", dir.Join("driver"), "--dev-root",
                          dir.Join("devroot"), "--nvidia-cdi-hook-path", dir.Join("no/hook")},
                         FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  ASSERT_EQ(r.code, 0) << r.err;
  // The spec names each GPU by UUID and by index, and "all".
  EXPECT_NE(r.out.find("cdi\n  kind:     gpu-agent.github.io/gpu\n  devices:  "
                       "GPU-98c751c8-5401-57c6-bc37-497291358157 0 all\n"),
            std::string::npos)
      << r.out;
}

// `gpu-agent health`: one poll of every check on every GPU, each check's
// raw NVML answers included; exit 0 whatever the GPUs' health.
TEST(CliTest, HealthReportsEveryCheckOnEveryGpuAndExitsZeroWhateverTheHealth) {
  TempDir dir;
  std::string text = ReadFile(FixturePath("8-gpu-pcie.yaml"));
  // GPU 0: the driver asks for a reset (unhealthy); its temperature query
  // answers NOT_SUPPORTED (the check off); GPU 1: PCIe at x8 (degraded).
  size_t at = text.find("  - uuid: ");
  text.insert(text.find('\n', at) + 1,
              "    recoveryAction: 1\n    fail:\n      nvmlDeviceGetTemperatureThreshold: 3\n");
  at = text.find("  - uuid: ", at + 1);
  text.insert(text.find('\n', at) + 1, "    pcieWidth: 8\n");
  const auto env = FakeNvmlEnv(dir.Write("f.yaml", text));
  RunResult json = RunAgent({"health", "-o", "json"}, env);
  ASSERT_EQ(json.code, 0) << json.err;
  rapidjson::Document d;
  d.Parse(json.out.c_str());
  ASSERT_FALSE(d.HasParseError()) << json.out;
  ASSERT_EQ(d["gpus"].Size(), 8u);
  EXPECT_LE(d["nvmlCallsPerGpuPerPoll"].GetDouble(), 10);
  auto check = [&](unsigned gpu, const std::string& name) -> const rapidjson::Value& {
    for (const auto& c : d["gpus"][gpu]["checks"].GetArray()) {
      if (c["check"].GetString() == name) return c;
    }
    ADD_FAILURE() << "no check " << name;
    return d;
  };
  EXPECT_STREQ(d["gpus"][0]["health"].GetString(), "unhealthy");
  EXPECT_STREQ(check(0, "recoveryAction")["state"].GetString(), "unhealthy");
  EXPECT_STREQ(check(0, "recoveryAction")["value"].GetString(), "GPU reset");
  EXPECT_STREQ(check(0, "recoveryAction")["raw"]["nvmlDeviceGetFieldValues(GPU_RECOVERY_ACTION)"]
                   .GetString(),
               "1");
  EXPECT_STREQ(check(0, "temperature")["state"].GetString(), "off");
  EXPECT_STREQ(
      check(0, "temperature")["raw"]["nvmlDeviceGetTemperatureThreshold(SLOWDOWN)"].GetString(),
      "not supported");
  EXPECT_STREQ(d["gpus"][1]["health"].GetString(), "degraded");
  EXPECT_STREQ(check(1, "pcieWidth")["state"].GetString(), "degraded");
  EXPECT_STREQ(check(1, "nvlink")["state"].GetString(), "off");  // PCIe-only
  EXPECT_STREQ(d["gpus"][2]["health"].GetString(), "healthy");
  EXPECT_EQ(d["gpus"][2]["checks"].Size(), 11u);
  EXPECT_STREQ(check(2, "temperature")["raw"]["nvmlDeviceGetTemperature(GPU)"].GetString(), "40");

  RunResult yaml = RunAgent({"health", "-o", "yaml"}, env);
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  YAML::Node y = YAML::Load(yaml.out);
  EXPECT_EQ(y["gpus"].size(), 8u);
  EXPECT_EQ(y["gpus"][1]["health"].as<std::string>(), "degraded");
  RunResult table = RunAgent({"health"}, env);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("recoveryAction       unhealthy  GPU reset"), std::string::npos)
      << table.out;
  // No driver: nothing to report, exit 1.
  RunResult none = RunAgent({"health", "-o", "json"});
  EXPECT_EQ(none.code, 1) << none.err;
  EXPECT_NE(none.err.find("NVML"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace gpu_agent::testing
