// The real gpu-agent binary as a subprocess: subcommands, exit codes, and
// what it prints for bad input.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

TEST(CliTest, HelpOnEverySubcommand) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"},
                                        {"run", "--help"},
                                        {"devices", "--help"},
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

}  // namespace
}  // namespace gpu_agent::testing
