// GPU node labels (gpu-feature-discovery's keys) end to end: the real binary
// computes them from the NVML stand-in's fixtures, prints them, writes them
// on a Node of the API server stand-in (in the same PATCH as capacity, with
// ownership recorded in an annotation), or into a node-feature-discovery
// feature file.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>

#include "api_server_stub.h"
#include "support/agent_env.h"
#include "support/driver_labels.h"

namespace gpu_agent::testing {
namespace {

using Labels = std::map<std::string, std::string>;
constexpr const char* kOwned = "gpu-agent.github.io/owned-labels";

// The driver and CUDA labels every fixture shares (driver 550.54.15, CUDA 12.4),
// and the machine and mode of a node whose sysfs has neither DMI nor the
// GPUs' PCI classes (FakeNvmlEnv points sysfs at an empty folder).
Labels Versions() {
  return With(DriverLabels(),
              {{"nvidia.com/gpu.machine", "unknown"}, {"nvidia.com/gpu.mode", "unknown"}});
}

Labels A100Pcie() {
  return With(Versions(), {{"nvidia.com/gpu.product", "NVIDIA-A100-PCIE-40GB"},
                           {"nvidia.com/gpu.count", "1"},
                           {"nvidia.com/gpu.memory", "40960"},
                           {"nvidia.com/gpu.family", "ampere"},
                           {"nvidia.com/gpu.compute.major", "8"},
                           {"nvidia.com/gpu.compute.minor", "0"},
                           {"nvidia.com/gpu.replicas", "1"},
                           {"nvidia.com/gpu.sharing-strategy", "none"},
                           {"nvidia.com/mig.capable", "true"}});
}

// The whole-GPU labels of the MIG fixture (2 A100 80GB, one out of MIG mode).
Labels A100Sxm() {
  return With(Versions(), {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                           {"nvidia.com/gpu.count", "2"},
                           {"nvidia.com/gpu.memory", "81920"},
                           {"nvidia.com/gpu.family", "ampere"},
                           {"nvidia.com/gpu.compute.major", "8"},
                           {"nvidia.com/gpu.compute.minor", "0"},
                           {"nvidia.com/gpu.replicas", "1"},
                           {"nvidia.com/gpu.sharing-strategy", "none"},
                           {"nvidia.com/mig.capable", "true"}});
}

// What a MIG profile's device offers, under `prefix`.
Labels MigAttributes(const std::string& prefix, const std::string& memory, const std::string& sms,
                     const std::string& slices, const std::string& decoders) {
  return {{prefix + ".memory", memory},       {prefix + ".multiprocessors", sms},
          {prefix + ".slices.gi", slices},    {prefix + ".slices.ci", slices},
          {prefix + ".engines.copy", slices}, {prefix + ".engines.decoder", decoders},
          {prefix + ".engines.encoder", "0"}, {prefix + ".engines.jpeg", "0"},
          {prefix + ".engines.ofa", "0"}};
}

Labels ParseLines(const std::string& text) {
  Labels out;
  size_t at = 0;
  while (at < text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(at, eol - at);
    at = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    out[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
  }
  return out;
}

// One fixture whose GPUs are all in MIG mode with one profile: what
// migStrategy single is for.
constexpr const char* kSingleFixture = R"(driverVersion: "550.54.15"
nvmlVersion: "12.550.54.15"
cudaDriverVersion: 12040
gpus:
  - uuid: GPU-ed474d47-acdb-5d33-bc5a-38d1d781b523
    name: NVIDIA A100-SXM4-80GB
    memoryMiB: 81920
    pciBusId: "00000000:07:00.0"
    computeCapability: "8.0"
    architecture: ampere
    migEnabled: true
    migProfiles:
      - {profile: 0, id: 19, name: MIG 1g.10gb, slices: 1, instances: 7, memoryMiB: 9856, multiprocessors: 14}
    migDevices:
      - {uuid: MIG-88046736-7ede-57ab-bf0a-d906907fb941, gpuInstanceId: 2, computeInstanceId: 0, memoryMiB: 9856, gpuInstanceSlices: 1, computeInstanceSlices: 1, multiprocessors: 14}
      - {uuid: MIG-0262095c-56cd-5b2e-903c-5f38b7f3d9b2, gpuInstanceId: 3, computeInstanceId: 0, memoryMiB: 9856, gpuInstanceSlices: 1, computeInstanceSlices: 1, multiprocessors: 14}
)";

// Two H100s registered in one NVLink fabric clique, in a machine that names
// itself in DMI (with the trailing blank some BIOSes leave).
constexpr const char* kFabricFixture = R"(productName: "PowerEdge XE9680 "
gpus:
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000001
    name: NVIDIA H100 80GB HBM3
    memoryMiB: 81559
    pciBusId: "00000000:18:00.0"
    computeCapability: "9.0"
    fabric: {clusterUuid: 5B6C2A3E-0F1D-4C2B-9A8E-7D6C5B4A3F21, cliqueId: 32766}
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000002
    name: NVIDIA H100 80GB HBM3
    memoryMiB: 81559
    pciBusId: "00000000:2a:00.0"
    computeCapability: "9.0"
    fabric: {clusterUuid: 5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21, cliqueId: 32766}
)";

// The same GPUs whose registration is not complete, or failed: no clique.
constexpr const char* kFabricPendingFixture = R"(gpus:
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000001
    name: NVIDIA H100 80GB HBM3
    memoryMiB: 81559
    pciBusId: "00000000:18:00.0"
    computeCapability: "9.0"
    fabric: {clusterUuid: 5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21, cliqueId: 1, state: in-progress}
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000002
    name: NVIDIA H100 80GB HBM3
    memoryMiB: 81559
    pciBusId: "00000000:2a:00.0"
    computeCapability: "9.0"
    fabric: {clusterUuid: 5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21, cliqueId: 1, status: 999}
)";

// GPUs in two cliques: the node is in no single one.
constexpr const char* kTwoCliquesFixture = R"(gpus:
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000001
    name: NVIDIA H100 80GB HBM3
    memoryMiB: 81559
    pciBusId: "00000000:18:00.0"
    computeCapability: "9.0"
    fabric: {clusterUuid: 5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21, cliqueId: 1}
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000002
    name: NVIDIA H100 80GB HBM3
    memoryMiB: 81559
    pciBusId: "00000000:2a:00.0"
    computeCapability: "9.0"
    fabric: {clusterUuid: 5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21, cliqueId: 2}
)";

// A workstation GPU driving a display (a VGA controller), and one whose
// GPUs disagree.
constexpr const char* kGraphicsFixture = R"(gpus:
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000003
    name: NVIDIA RTX A6000
    memoryMiB: 49140
    pciBusId: "00000000:65:00.0"
    computeCapability: "8.6"
    pciClass: 0x030000
)";
constexpr const char* kMixedModeFixture = R"(gpus:
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000003
    name: NVIDIA RTX A6000
    memoryMiB: 49140
    pciBusId: "00000000:65:00.0"
    computeCapability: "8.6"
    pciClass: 0x030000
  - uuid: GPU-1b3c5d7e-0000-4000-8000-000000000004
    name: NVIDIA RTX A6000
    memoryMiB: 49140
    pciBusId: "00000000:b3:00.0"
    computeCapability: "8.6"
)";

Labels H100s(const Labels& more) {
  return With(With(Versions(), {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                {"nvidia.com/gpu.count", "2"},
                                {"nvidia.com/gpu.memory", "81559"},
                                {"nvidia.com/gpu.family", "hopper"},
                                {"nvidia.com/gpu.compute.major", "9"},
                                {"nvidia.com/gpu.compute.minor", "0"},
                                {"nvidia.com/gpu.replicas", "1"},
                                {"nvidia.com/gpu.sharing-strategy", "none"},
                                {"nvidia.com/gpu.mode", "compute"},
                                {"nvidia.com/mig.capable", "true"}}),
              more);
}

Labels A6000s(const std::string& count, const std::string& mode) {
  return With(Versions(), {{"nvidia.com/gpu.product", "NVIDIA-RTX-A6000"},
                           {"nvidia.com/gpu.count", count},
                           {"nvidia.com/gpu.memory", "49140"},
                           {"nvidia.com/gpu.family", "ampere"},
                           {"nvidia.com/gpu.compute.major", "8"},
                           {"nvidia.com/gpu.compute.minor", "6"},
                           {"nvidia.com/gpu.replicas", "1"},
                           {"nvidia.com/gpu.sharing-strategy", "none"},
                           {"nvidia.com/gpu.mode", mode},
                           {"nvidia.com/mig.capable", "true"}});
}

// Fixtures written by the test rather than kept under tests/fixtures/nvml.
const std::map<std::string, const char*>& InlineFixtures() {
  static const auto* m =
      new std::map<std::string, const char*>{{"single", kSingleFixture},
                                             {"fabric", kFabricFixture},
                                             {"fabric-pending", kFabricPendingFixture},
                                             {"two-cliques", kTwoCliquesFixture},
                                             {"graphics", kGraphicsFixture},
                                             {"mixed-mode", kMixedModeFixture}};
  return *m;
}

struct FixtureCase {
  FixtureCase(std::string n, std::string f, std::vector<std::string> a, Labels w, bool s = false,
              std::string warn = "")
      : name(std::move(n)),
        fixture(std::move(f)),
        args(std::move(a)),
        want(std::move(w)),
        sysfs(s),
        warning(std::move(warn)) {}
  std::string name;
  std::string fixture;  // a file under tests/fixtures/nvml, or a name in InlineFixtures()
  std::vector<std::string> args;
  Labels want;
  // Write the fixture's sysfs tree (PCI classes, DMI) and point the agent at it.
  bool sysfs = false;
  std::string warning;  // a warning stderr must carry, if any
};

class LabelsPrintTest : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(LabelsPrintTest, ExactKeysAndValues) {
  const FixtureCase& c = GetParam();
  TempDir dir;
  auto inline_fixture = InlineFixtures().find(c.fixture);
  const std::string fixture = inline_fixture != InlineFixtures().end()
                                  ? dir.Write(c.fixture + ".yaml", inline_fixture->second)
                                  : FixturePath(c.fixture);
  std::vector<std::string> args = {"labels"};
  if (c.sysfs) {
    ASSERT_TRUE(WriteFixtureSysfs(fixture, dir.Join("sys")));
    args.insert(args.end(), {"--sysfs-root", dir.Join("sys")});
  }
  for (const std::string& a : c.args) {
    args.push_back(a != "TIMESLICE" ? a
                                    : dir.Write("ts.yaml",
                                                "version: v1\nsharing:\n  timeSlicing:\n"
                                                "    resources:\n      - name: nvidia.com/gpu\n"
                                                "        replicas: 4\n"));
  }
  RunResult r = RunAgent(args, FakeNvmlEnv(fixture));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ParseLines(r.out), c.want) << r.out;
  EXPECT_NE(r.err.find(c.warning), std::string::npos) << r.err;
  for (const auto& [k, v] : ParseLines(r.out)) {
    EXPECT_LE(v.size(), 63u) << k;
    EXPECT_EQ(k.rfind("nvidia.com/", 0), 0u) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, LabelsPrintTest,
    ::testing::Values(
        FixtureCase{"OneGpu", "1-gpu.yaml", {}, A100Pcie()},
        FixtureCase{"EightNvlink",
                    "8-gpu-nvlink.yaml",
                    {},
                    With(Versions(), {{"nvidia.com/gpu.product", "Tesla-V100-SXM2-32GB"},
                                      {"nvidia.com/gpu.count", "8"},
                                      {"nvidia.com/gpu.memory", "32768"},
                                      {"nvidia.com/gpu.family", "volta"},
                                      {"nvidia.com/gpu.compute.major", "7"},
                                      {"nvidia.com/gpu.compute.minor", "0"},
                                      {"nvidia.com/gpu.replicas", "1"},
                                      {"nvidia.com/gpu.sharing-strategy", "none"},
                                      {"nvidia.com/mig.capable", "false"}})},
        FixtureCase{"EightPcie",
                    "8-gpu-pcie.yaml",
                    {},
                    // The NVML stand-in answers nvmlDeviceGetMigMode for every
                    // GPU of compute capability 8 or more, so its L40S are
                    // "MIG capable"; a real L40S answers NOT_SUPPORTED.
                    With(Versions(), {{"nvidia.com/gpu.product", "NVIDIA-L40S"},
                                      {"nvidia.com/gpu.count", "8"},
                                      {"nvidia.com/gpu.memory", "46068"},
                                      {"nvidia.com/gpu.family", "ada-lovelace"},
                                      {"nvidia.com/gpu.compute.major", "8"},
                                      {"nvidia.com/gpu.compute.minor", "9"},
                                      {"nvidia.com/gpu.replicas", "1"},
                                      {"nvidia.com/gpu.sharing-strategy", "none"},
                                      {"nvidia.com/mig.capable", "true"}})},
        FixtureCase{"TimeSliced",
                    "1-gpu.yaml",
                    {"--config", "TIMESLICE"},
                    With(A100Pcie(), {{"nvidia.com/gpu.product", "NVIDIA-A100-PCIE-40GB-SHARED"},
                                      {"nvidia.com/gpu.replicas", "4"},
                                      {"nvidia.com/gpu.sharing-strategy", "time-slicing"}})},
        FixtureCase{"MigNone", "2-gpu-mig.yaml", {"--mig-strategy", "none"}, A100Sxm()},
        FixtureCase{
            "MigMixed",
            "2-gpu-mig.yaml",
            {"--mig-strategy", "mixed"},
            With(With(With(A100Sxm(),
                           {{"nvidia.com/mig.strategy", "mixed"},
                            {"nvidia.com/mig-1g.10gb.product", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"},
                            {"nvidia.com/mig-1g.10gb.count", "2"},
                            {"nvidia.com/mig-1g.10gb.replicas", "1"},
                            {"nvidia.com/mig-1g.10gb.sharing-strategy", "none"},
                            {"nvidia.com/mig-2g.20gb.product", "NVIDIA-A100-SXM4-80GB-MIG-2g.20gb"},
                            {"nvidia.com/mig-2g.20gb.count", "1"},
                            {"nvidia.com/mig-2g.20gb.replicas", "1"},
                            {"nvidia.com/mig-2g.20gb.sharing-strategy", "none"}}),
                      MigAttributes("nvidia.com/mig-1g.10gb", "9856", "14", "1", "0")),
                 MigAttributes("nvidia.com/mig-2g.20gb", "19968", "28", "2", "1"))},
        FixtureCase{
            "MigSingle",
            "single",
            {"--mig-strategy", "single"},
            With(With(Versions(), {{"nvidia.com/mig.strategy", "single"},
                                   {"nvidia.com/mig.capable", "true"},
                                   {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"},
                                   {"nvidia.com/gpu.count", "2"},
                                   {"nvidia.com/gpu.replicas", "1"},
                                   {"nvidia.com/gpu.sharing-strategy", "none"},
                                   {"nvidia.com/gpu.family", "ampere"},
                                   {"nvidia.com/gpu.compute.major", "8"},
                                   {"nvidia.com/gpu.compute.minor", "0"}}),
                 MigAttributes("nvidia.com/gpu", "9856", "14", "1", "0"))},
        // GFD's machine, mode and clique labels, from sysfs and NVML's
        // fabric info. The cluster UUID is written lower-case, as Go's
        // uuid.String() does, whatever case the fixture uses.
        FixtureCase{
            "FabricClique",
            "fabric",
            {},
            H100s({{"nvidia.com/gpu.machine", "PowerEdge-XE9680"},
                   {"nvidia.com/gpu.clique", "5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21.32766"}}),
            true},
        FixtureCase{"FabricNotRegisteredHasNoClique", "fabric-pending", {}, H100s({}), true},
        FixtureCase{"TwoCliquesHaveNoClique",
                    "two-cliques",
                    {},
                    H100s({}),
                    true,
                    "2 clique(s), not one: no nvidia.com/gpu.clique label"},
        // No fabric info at all (the stand-in answers NOT_SUPPORTED): no clique.
        FixtureCase{"GraphicsMode", "graphics", {}, A6000s("1", "graphics"), true},
        FixtureCase{"MixedClassesModeUnknown", "mixed-mode", {}, A6000s("2", "unknown"), true}),
    [](const ::testing::TestParamInfo<FixtureCase>& i) { return i.param.name; });

// GPU 1 is out of MIG mode and GPU 0 has two profiles: migStrategy single
// does not fit. `labels` builds the generation `run` builds, so it refuses
// the config with run's own message instead of printing labels (GFD's
// "-MIG-INVALID") for a node `run` would never serve.
TEST(LabelsCliTest, RefusesWhatRunRefuses) {
  const std::string why = "flags.migStrategy single needs every GPU in MIG mode, but GPU(s) 1";
  RunResult labels =
      RunAgent({"labels", "--mig-strategy", "single"}, FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  EXPECT_EQ(labels.code, 2);
  EXPECT_EQ(labels.out, "");
  EXPECT_NE(labels.err.find(why), std::string::npos) << labels.err;
  RunResult run = RunAgent({"run", "--mode", "static", "--node-name", "n1", "--mig-strategy",
                            "single", "--proxy", "http://127.0.0.1:1"},
                           FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find(why), std::string::npos) << run.err;
}

TEST(LabelsCliTest, JsonAndYamlSayTheSame) {
  const auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  RunResult json = RunAgent({"labels", "-o", "json"}, env);
  RunResult yaml = RunAgent({"labels", "-o", "yaml"}, env);
  ASSERT_EQ(json.code, 0) << json.err;
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  for (const auto& [k, v] : A100Pcie()) {
    EXPECT_NE(json.out.find("\"" + k + "\": \"" + v + "\""), std::string::npos) << k << json.out;
    EXPECT_NE(yaml.out.find(k + ": \"" + v + "\""), std::string::npos) << k << yaml.out;
  }
  RunResult bad = RunAgent({"labels", "-o", "xml"}, env);
  EXPECT_EQ(bad.code, 2);
}

class NodeLabelsTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra = {}, const std::string& fixture = "1-gpu.yaml") {
    std::vector<std::string> args = {
        BinaryPath(), "run", "--mode", "static", "--node-name", "n1", "--proxy=" + api_.url()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto env = FakeNvmlEnv(FixturePath(fixture));
    agent_ = std::make_unique<Subprocess>(args, env);
  }
  void Stop() {
    agent_->Signal(SIGTERM);
    ASSERT_EQ(agent_->Wait(), 0) << Log();
    agent_.reset();
  }
  // The labels the agent keeps: the Node's nvidia.com/ ones.
  Labels Ours() {
    Labels out;
    for (const auto& [k, v] : api_.Labels("n1")) {
      if (k.rfind("nvidia.com/", 0) == 0) out[k] = v;
    }
    return out;
  }
  std::string Owned() {
    const Labels a = api_.Annotations("n1");
    auto it = a.find(kOwned);
    return it == a.end() ? "<none>" : it->second;
  }
  bool LabelsAre(const Labels& want, std::chrono::milliseconds t = std::chrono::seconds(10)) {
    return WaitFor([&] { return Ours() == want; }, t);
  }
  std::string Log() { return agent_ ? agent_->Stderr() : ""; }

  ApiServerStub api_;
  std::unique_ptr<Subprocess> agent_;
  TempDir dir_;
};

std::string Keys(const Labels& l) {
  std::string out;
  for (const auto& [k, v] : l) out += (out.empty() ? "" : ",") + k;
  return out;
}

TEST_F(NodeLabelsTest, LabelsAndCapacityGoInOnePatchOfNodeStatus) {
  api_.AddNode("n1");
  Start();
  ASSERT_TRUE(LabelsAre(A100Pcie())) << Log();
  EXPECT_EQ(api_.Capacity("n1", "nvidia.com/gpu"), "1");
  EXPECT_EQ(api_.patch_count(), 1);
  EXPECT_EQ(Owned(), Keys(A100Pcie()));
  // The status subresource carries the labels: no patch of the Node itself,
  // so no RBAC rule beyond what capacity needs. (The watch opens after the
  // first PATCH, which may land first; the Node is read once, for a
  // GpuHealthy condition an earlier agent may have left.)
  ASSERT_TRUE(WaitFor([&] { return api_.watch_count() >= 1; })) << Log();
  ASSERT_TRUE(WaitFor([&] { return api_.calls().count("get nodes") > 0; })) << Log();
  EXPECT_EQ(api_.calls(), (std::set<std::string>{"list nodes", "watch nodes", "get nodes",
                                                 "patch nodes/status"}));
}

TEST_F(NodeLabelsTest, DriftIsRepairedAndSteadyStateSendsNothing) {
  api_.AddNode("n1");
  Start();
  ASSERT_TRUE(LabelsAre(A100Pcie())) << Log();
  ASSERT_TRUE(WaitFor([&] { return api_.watch_count() >= 1; }));
  const int patches = api_.patch_count();
  // Another writer's label: a Node event the agent reads and must send
  // nothing for. The edit after it is seen after it, on the same watch.
  api_.SetLabel("n1", "example.com/rack", "r7");
  api_.SetLabel("n1", "nvidia.com/gpu.product", "Tesla-T4");  // someone edits an owned key
  ASSERT_TRUE(WaitFor([&] {
    return api_.Labels("n1")["nvidia.com/gpu.product"] == "NVIDIA-A100-PCIE-40GB";
  })) << Log();
  EXPECT_EQ(api_.patch_count(), patches + 1) << "nothing of ours changed, nothing is sent";
  api_.SetLabel("n1", "nvidia.com/gpu.count", std::nullopt);  // ... or removes one
  ASSERT_TRUE(LabelsAre(A100Pcie())) << Log();
  EXPECT_EQ(api_.patch_count(), patches + 2);
}

TEST_F(NodeLabelsTest, ForeignKeysAreLeftAndStaleOwnKeysRemoved) {
  api_.AddNode("n1");
  // Another writer's labels: one the agent also wants (other value), one
  // it never writes, one outside nvidia.com.
  api_.SetLabel("n1", "nvidia.com/gpu.family", "custom");
  api_.SetLabel("n1", "nvidia.com/gpu.deploy.driver", "true");
  api_.SetLabel("n1", "team", "ml");
  Start({"--mig-strategy", "mixed"}, "2-gpu-mig.yaml");
  ASSERT_TRUE(WaitFor([&] { return Ours().count("nvidia.com/mig-1g.10gb.count") > 0; })) << Log();
  EXPECT_EQ(api_.Labels("n1")["nvidia.com/gpu.family"], "custom");
  EXPECT_EQ(Owned().find("nvidia.com/gpu.family"), std::string::npos) << Owned();
  ASSERT_TRUE(agent_->WaitForStderr("held by another writer")) << Log();
  Stop();
  // MIG strategy changed: the agent's mig-* keys go, nothing else does.
  Start({"--mig-strategy", "none"}, "2-gpu-mig.yaml");
  Labels want = With(
      A100Sxm(), {{"nvidia.com/gpu.family", "custom"}, {"nvidia.com/gpu.deploy.driver", "true"}});
  ASSERT_TRUE(LabelsAre(want)) << Log();
  EXPECT_EQ(api_.Labels("n1")["team"], "ml");
  Stop();
  // Labels turned off: every key the agent owns goes, and its annotation.
  Start({"--node-labels", "none"}, "2-gpu-mig.yaml");
  ASSERT_TRUE(
      LabelsAre({{"nvidia.com/gpu.family", "custom"}, {"nvidia.com/gpu.deploy.driver", "true"}}))
      << Log();
  ASSERT_TRUE(WaitFor([&] { return Owned() == "<none>"; })) << Log();
  EXPECT_EQ(api_.Labels("n1")["team"], "ml");
  EXPECT_EQ(api_.Capacity("n1", "nvidia.com/gpu"), "2");
}

TEST_F(NodeLabelsTest, OnePatchWhenCapacityAndLabelsChangeTogether) {
  api_.AddNode("n1");
  const std::string config = dir_.Write("c.yaml", "version: v1\n");
  Start({"--config", config});
  ASSERT_TRUE(LabelsAre(A100Pcie())) << Log();
  const int patches = api_.patch_count();
  dir_.Write("c.yaml",
             "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
             "      - name: nvidia.com/gpu\n        replicas: 4\n");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(
      LabelsAre(With(A100Pcie(), {{"nvidia.com/gpu.product", "NVIDIA-A100-PCIE-40GB-SHARED"},
                                  {"nvidia.com/gpu.replicas", "4"},
                                  {"nvidia.com/gpu.sharing-strategy", "time-slicing"}})))
      << Log();
  EXPECT_EQ(api_.Capacity("n1", "nvidia.com/gpu"), "4");
  EXPECT_EQ(api_.patch_count(), patches + 1) << "capacity and labels in one PATCH\n" << Log();
}

TEST_F(NodeLabelsTest, RefusedLabelKeysAreExplainedAndCapacityStillKept) {
  api_.AddNode("n1");
  // An admission rule (NodeRestriction's 403, for keys it will not take).
  api_.ForbidLabelPrefixes({"nvidia.com/mig."});
  Start();
  ASSERT_TRUE(agent_->WaitForStderr("refused the node labels")) << Log();
  ASSERT_TRUE(WaitFor([&] { return api_.Capacity("n1", "nvidia.com/gpu") == "1"; })) << Log();
  const std::string log = Log();
  EXPECT_NE(log.find("is not allowed to modify labels: nvidia.com/mig.capable"), std::string::npos)
      << log;
  EXPECT_NE(log.find("NodeRestriction"), std::string::npos) << log;
  EXPECT_NE(log.find("nodeLabels.output"), std::string::npos) << log;
  EXPECT_TRUE(Ours().empty());
}

TEST_F(NodeLabelsTest, NodeCredentialsUnderNodeRestrictionMayWriteNvidiaKeys) {
  api_.AddNode("n1");
  api_.AllowToken("node-token", true, "system:node:n1");
  const std::string token = dir_.Write("token", "node-token");
  std::vector<std::string> args = {BinaryPath(),   "run", "--mode",   "static",
                                   "--node-name",  "n1",  "--server", api_.url(),
                                   "--token-file", token};
  auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  agent_ = std::make_unique<Subprocess>(args, env);
  ASSERT_TRUE(LabelsAre(A100Pcie())) << Log();
}

TEST_F(NodeLabelsTest, NfdFeatureFileHasTheLabelsAndTheNodeNone) {
  api_.AddNode("n1");
  const std::string file = dir_.Join("gpu-agent");
  Start({"--node-labels", "nfd", "--nfd-feature-file", file});
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(file); })) << Log();
  std::string want =
      "# Written by gpu-agent (nodeLabels.output: nfd): GPU labels with gpu-feature-discovery's "
      "keys.\n# Rewritten when they change; removed when the agent's labels are turned off.\n";
  for (const auto& [k, v] : A100Pcie()) want += k + "=" + v + "\n";
  EXPECT_EQ(ReadFile(file), want);
  ASSERT_TRUE(WaitFor([&] { return api_.Capacity("n1", "nvidia.com/gpu") == "1"; })) << Log();
  EXPECT_TRUE(Ours().empty());
  Stop();
  Start({"--node-labels", "none", "--nfd-feature-file", file});
  ASSERT_TRUE(WaitFor([&] { return !std::filesystem::exists(file); })) << Log();
  Stop();
  // Another tool's file at that path is not the agent's to replace.
  dir_.Write("gpu-agent", "vendor.example/x=1\n");
  Start({"--node-labels", "nfd", "--nfd-feature-file", file});
  ASSERT_TRUE(agent_->WaitForStderr("not written by gpu-agent")) << Log();
  EXPECT_EQ(ReadFile(file), "vendor.example/x=1\n");
}

TEST_F(NodeLabelsTest, CliAppliesAndRemovesOnlyItsOwnLabels) {
  api_.AddNode("n1");
  api_.SetLabel("n1", "nvidia.com/gpu.deploy.driver", "true");
  auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  RunResult dry =
      RunAgent({"labels", "apply", "--node", "n1", "--proxy=" + api_.url(), "--dry-run"}, env);
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("PATCH " + api_.url() + "/api/v1/nodes/n1/status"), std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("nvidia.com~1gpu.product"), std::string::npos) << dry.out;
  EXPECT_EQ(api_.patch_count(), 0);
  RunResult apply = RunAgent({"labels", "apply", "--node", "n1", "--proxy=" + api_.url()}, env);
  ASSERT_EQ(apply.code, 0) << apply.err;
  EXPECT_EQ(Ours(), With(A100Pcie(), {{"nvidia.com/gpu.deploy.driver", "true"}}));
  EXPECT_EQ(api_.patch_count(), 1);
  RunResult again = RunAgent({"labels", "apply", "--node", "n1", "--proxy=" + api_.url()}, env);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("already right"), std::string::npos) << again.out;
  EXPECT_EQ(api_.patch_count(), 1);
  RunResult remove = RunAgent({"labels", "remove", "--node", "n1", "--proxy=" + api_.url()}, env);
  ASSERT_EQ(remove.code, 0) << remove.err;
  EXPECT_EQ(Ours(), (Labels{{"nvidia.com/gpu.deploy.driver", "true"}}));
  EXPECT_EQ(Owned(), "<none>");
  RunResult no_node = RunAgent({"labels", "apply", "--proxy=" + api_.url()}, env);
  EXPECT_EQ(no_node.code, 2);
  EXPECT_NE(no_node.err.find("--node"), std::string::npos) << no_node.err;
}

}  // namespace
}  // namespace gpu_agent::testing
