// The GPU labels (gpu-feature-discovery's keys) computed from hand-made
// inventories: whole GPUs, the MIG strategies, GPUs some queries failed on,
// time-slicing, and names that must be cut or left out to stay within
// Kubernetes' label rules. Pure: each case states exactly what the node has.
#include "agent/labels/gpu_labels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "base/strings.h"
#include "support/driver_labels.h"
#include "support/gpu_records.h"

namespace gpu_agent {
namespace {

using gpu_agent::testing::AllMigNode;
using gpu_agent::testing::DriverLabels;
using gpu_agent::testing::Gpu;
using gpu_agent::testing::Mig;
using gpu_agent::testing::MixedNode;
using gpu_agent::testing::PlainNode;
using gpu_agent::testing::With;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Every GPU of `inv`, as the device model holds them with no devices.*
// selection and every GPU servable.
std::vector<size_t> All(const nvml::Inventory& inv) {
  std::vector<size_t> all;
  for (size_t i = 0; i < inv.gpus.size(); ++i) all.push_back(i);
  return all;
}

// An inventory as a healthy driver reports it: versions, and every GPU an
// Ampere of compute capability 8.0.
nvml::Inventory Reported(nvml::Inventory inv) {
  inv.driver_version = "550.54.15";
  inv.cuda_driver_version = "12.4";
  for (nvml::GpuRecord& g : inv.gpus) {
    g.cc_major = 8;
    g.cc_minor = 0;
    g.mig_capable = true;
  }
  return inv;
}

Config WithStrategy(const std::string& strategy) {
  Config c;
  c.flags.mig_strategy = strategy;
  return c;
}

// `sharing`: the device model's time-slicing (none unless given).
LabelResult Labels(const Config& c, const nvml::Inventory& inv,
                   const SharingByResource& sharing = {}) {
  return ComputeNodeLabels(c, inv, All(inv), sharing);
}

std::string Warnings(const LabelResult& r) { return StrJoin(r.warnings, "\n"); }

// Kubernetes' rules: a key's name part and a value are at most 63
// characters of [A-Za-z0-9-_.], alphanumeric at both ends (a value may be
// empty). What the API server would refuse the whole PATCH for.
void ExpectValidLabels(const NodeLabels& labels) {
  static const std::regex kName("([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?");
  for (const auto& [key, value] : labels) {
    ASSERT_EQ(key.rfind("nvidia.com/", 0), 0u) << key;
    const std::string name = key.substr(key.find('/') + 1);
    EXPECT_FALSE(name.empty()) << key;
    EXPECT_LE(name.size(), 63u) << key;
    EXPECT_TRUE(std::regex_match(name, kName)) << key;
    EXPECT_LE(value.size(), 63u) << key << "=" << value;
    EXPECT_TRUE(std::regex_match(value, kName)) << key << "=" << value;
  }
}

TEST(GpuLabels, WholeGpusOfOneModelExactly) {
  nvml::Inventory inv = Reported(PlainNode(2));
  inv.machine_product = "PowerEdge XE9680 ";
  for (nvml::GpuRecord& g : inv.gpus) g.pci_class = 0x030200;
  const LabelResult r = Labels(Config{}, inv);
  EXPECT_EQ(r.labels, With(DriverLabels(), {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                                            {"nvidia.com/gpu.count", "2"},
                                            {"nvidia.com/gpu.replicas", "1"},
                                            {"nvidia.com/gpu.sharing-strategy", "none"},
                                            {"nvidia.com/gpu.memory", "81920"},
                                            {"nvidia.com/gpu.family", "ampere"},
                                            {"nvidia.com/gpu.compute.major", "8"},
                                            {"nvidia.com/gpu.compute.minor", "0"},
                                            {"nvidia.com/gpu.machine", "PowerEdge-XE9680"},
                                            {"nvidia.com/gpu.mode", "compute"},
                                            {"nvidia.com/mig.capable", "true"}}));
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(GpuLabels, OnlyTheChosenGpusAreCountedAndNoneMeansNoLabels) {
  const nvml::Inventory inv = Reported(PlainNode(3));
  EXPECT_EQ(ComputeNodeLabels(Config{}, inv, {2}, {}).labels.at("nvidia.com/gpu.count"), "1");
  const LabelResult none = ComputeNodeLabels(Config{}, inv, {}, {});
  EXPECT_THAT(none.labels, IsEmpty());
  EXPECT_THAT(none.warnings, IsEmpty());
}

TEST(GpuLabels, FamilyFollowsComputeCapabilityAndModeThePciClass) {
  struct Case {
    int major, minor;
    const char* family;
  };
  for (const Case& c : {Case{7, 0, "volta"}, Case{7, 5, "turing"}, Case{8, 6, "ampere"},
                        Case{8, 9, "ada-lovelace"}, Case{9, 0, "hopper"}, Case{10, 0, "blackwell"},
                        Case{12, 0, "blackwell"}, Case{11, 0, "undefined"}}) {
    nvml::Inventory inv = Reported(PlainNode(1));
    inv.gpus[0].cc_major = c.major;
    inv.gpus[0].cc_minor = c.minor;
    EXPECT_EQ(Labels(Config{}, inv).labels.at("nvidia.com/gpu.family"), c.family)
        << c.major << "." << c.minor;
  }
  nvml::Inventory inv = Reported(PlainNode(2));
  inv.gpus[0].pci_class = inv.gpus[1].pci_class = 0x030000;
  EXPECT_EQ(Labels(Config{}, inv).labels.at("nvidia.com/gpu.mode"), "graphics");
  inv.gpus[1].pci_class = 0x030200;  // the GPUs disagree
  EXPECT_EQ(Labels(Config{}, inv).labels.at("nvidia.com/gpu.mode"), "unknown");
}

TEST(GpuLabels, SeveralModelsDescribeTheOneWithMostWholeGpusAndSaySo) {
  nvml::Inventory inv = Reported(PlainNode(3));
  inv.gpus[0].name = "NVIDIA H100 80GB HBM3";
  inv.gpus[0].memory_mib = 81559;
  LabelResult r = Labels(Config{}, inv);
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "81920");
  EXPECT_THAT(r.warnings,
              ElementsAre("several GPU models on this node (\"NVIDIA A100-SXM4-80GB\" x2, "
                          "\"NVIDIA H100 80GB HBM3\" x1): the nvidia.com/gpu.* labels describe "
                          "\"NVIDIA A100-SXM4-80GB\""));

  // A model all in MIG mode loses to one with a whole GPU, even with more GPUs.
  inv.gpus[1].mig_enabled = inv.gpus[2].mig_enabled = true;
  r = Labels(Config{}, inv);
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "81559");
}

TEST(GpuLabels, AFailedQueryLeavesOutOnlyTheLabelsItWouldHaveFilled) {
  nvml::Inventory inv = Reported(PlainNode(1));
  nvml::GpuRecord& g = inv.gpus[0];
  g.error = "nvmlDeviceGetMemoryInfo: Insufficient Permissions";
  g.memory_mib = 0;
  g.cc_major = g.cc_minor = 0;
  g.fabric.error = "nvmlDeviceGetGpuFabricInfoV: Unknown Error";
  inv.driver_version = "unknown";
  inv.cuda_driver_version = "";
  const LabelResult r = Labels(Config{}, inv);
  for (const char* gone :
       {"nvidia.com/gpu.memory", "nvidia.com/gpu.family", "nvidia.com/gpu.compute.major",
        "nvidia.com/gpu.compute.minor", "nvidia.com/gpu.clique", "nvidia.com/cuda.driver.major",
        "nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.runtime.major"}) {
    EXPECT_EQ(r.labels.count(gone), 0u) << gone;
  }
  // The GPU is still there and labelled by what was read.
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.present"), "true");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "1");
  EXPECT_THAT(r.warnings,
              ElementsAre("driver version \"unknown\" is not X.Y[.Z]: no cuda.driver labels",
                          "CUDA driver version \"\" is not X.Y: no cuda.runtime labels",
                          "GPU 0's fabric info is unreadable (nvmlDeviceGetGpuFabricInfoV: "
                          "Unknown Error): no nvidia.com/gpu.clique label"));
  ExpectValidLabels(r.labels);
}

TEST(GpuLabels, CliqueOnlyWhenEveryAttachedGpuSharesOne) {
  nvml::Inventory inv = Reported(PlainNode(2));
  for (nvml::GpuRecord& g : inv.gpus) {
    g.fabric.attached = true;
    g.fabric.cluster_uuid = "5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21";
    g.fabric.clique_id = 32766;
  }
  EXPECT_EQ(Labels(Config{}, inv).labels.at("nvidia.com/gpu.clique"),
            "5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21.32766");
  inv.gpus[1].fabric.clique_id = 1;
  const LabelResult r = Labels(Config{}, inv);
  EXPECT_EQ(r.labels.count("nvidia.com/gpu.clique"), 0u);
  EXPECT_THAT(Warnings(r), HasSubstr("1 fabric cluster(s) and 2 clique(s), not one"));
}

TEST(GpuLabels, MigStrategyNoneLabelsTheGpusWhole) {
  const LabelResult r = Labels(WithStrategy("none"), Reported(MixedNode()));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "81920");
  EXPECT_EQ(r.labels.count("nvidia.com/mig.strategy"), 0u);
  for (const auto& [key, value] : r.labels) EXPECT_THAT(key, Not(HasSubstr("mig-"))) << key;
}

TEST(GpuLabels, MigStrategySingleDescribesTheOneProfile) {
  const LabelResult r = Labels(WithStrategy("single"), Reported(AllMigNode()));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "4");  // MIG devices, not GPUs
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "9856");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.slices.gi"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.slices.ci"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(r.labels.at("nvidia.com/mig.capable"), "true");
  EXPECT_THAT(r.warnings, IsEmpty());
  ExpectValidLabels(r.labels);
}

TEST(GpuLabels, MigStrategySingleOnANodeItDoesNotFitIsMigInvalid) {
  struct Case {
    std::string name;
    nvml::Inventory inv;
    std::string why;
  };
  nvml::Inventory two_profiles = AllMigNode();
  two_profiles.gpus[1].mig_devices = {Mig(0, 1, 2, 19968, "MIG-1x")};
  nvml::Inventory empty_mig = AllMigNode();
  empty_mig.gpus[1].mig_devices.clear();
  for (const Case& c : std::vector<Case>{
           {"mixed", MixedNode(), "GPU 1 is not in MIG mode while others are"},
           {"two profiles", two_profiles, "2 MIG profiles on the node (single needs exactly one)"},
           {"no MIG device", empty_mig, "GPU 1 is in MIG mode with no MIG device"}}) {
    const LabelResult r = Labels(WithStrategy("single"), Reported(c.inv));
    EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-MIG-INVALID") << c.name;
    EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "0") << c.name;
    EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "0") << c.name;
    EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "0") << c.name;
    EXPECT_THAT(r.warnings, ElementsAre(StrCat("migStrategy single does not fit this node: ", c.why,
                                               "; labelling it MIG-INVALID")))
        << c.name;
  }
  // No GPU in MIG mode: single labels as none does.
  const LabelResult whole = Labels(WithStrategy("single"), Reported(PlainNode(2)));
  EXPECT_EQ(whole.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(whole.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_THAT(whole.warnings, IsEmpty());
}

TEST(GpuLabels, MigStrategyMixedLabelsEachProfileUnderItsResource) {
  nvml::Inventory inv = Reported(MixedNode());
  inv.gpus[0].mig_devices[0].multiprocessors = 28;
  inv.gpus[0].mig_devices[0].copy_engines = 2;
  inv.gpus[0].mig_devices[0].decoders = 1;
  const LabelResult r = Labels(WithStrategy("mixed"), inv);
  const NodeLabels want_2g = {
      {"nvidia.com/mig-2g.20gb.product", "NVIDIA-A100-SXM4-80GB-MIG-2g.20gb"},
      {"nvidia.com/mig-2g.20gb.count", "1"},
      {"nvidia.com/mig-2g.20gb.replicas", "1"},
      {"nvidia.com/mig-2g.20gb.sharing-strategy", "none"},
      {"nvidia.com/mig-2g.20gb.memory", "19968"},
      {"nvidia.com/mig-2g.20gb.multiprocessors", "28"},
      {"nvidia.com/mig-2g.20gb.slices.gi", "2"},
      {"nvidia.com/mig-2g.20gb.slices.ci", "2"},
      {"nvidia.com/mig-2g.20gb.engines.copy", "2"},
      {"nvidia.com/mig-2g.20gb.engines.decoder", "1"},
      {"nvidia.com/mig-2g.20gb.engines.encoder", "0"},
      {"nvidia.com/mig-2g.20gb.engines.jpeg", "0"},
      {"nvidia.com/mig-2g.20gb.engines.ofa", "0"}};
  for (const auto& [key, value] : want_2g) {
    ASSERT_EQ(r.labels.count(key), 1u) << key;
    EXPECT_EQ(r.labels.at(key), value) << key;
  }
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.memory"), "9856");
  // The whole-GPU labels stay, for the GPU out of MIG mode.
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "81920");
  EXPECT_EQ(r.labels.at("nvidia.com/mig.strategy"), "mixed");
  EXPECT_THAT(r.warnings, IsEmpty());
  ExpectValidLabels(r.labels);
}

TEST(GpuLabels, AMigDeviceWithoutAProfileNameIsNotLabelled) {
  nvml::Inventory inv = Reported(MixedNode());
  inv.gpus[0].mig_devices[2].memory_mib = 0;  // its query failed
  const LabelResult r = Labels(WithStrategy("mixed"), inv);
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.count"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-2g.20gb.count"), "1");
  EXPECT_THAT(r.warnings,
              ElementsAre("MIG device MIG-c on GPU 0 has no profile name: not labelled"));
}

TEST(GpuLabels, TimeSlicedGpusAreSharedUnlessRenamed) {
  const nvml::Inventory inv = Reported(PlainNode(2));
  LabelResult r = Labels(Config{}, inv, {{"nvidia.com/gpu", {4, /*renamed=*/false}}});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-SHARED");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");

  r = Labels(Config{}, inv, {{"nvidia.com/gpu", {4, /*renamed=*/true}}});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "4");

  // Replicas of another resource leave nvidia.com/gpu unshared.
  r = Labels(Config{}, inv, {{"nvidia.com/mig-1g.10gb", {4, /*renamed=*/false}}});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "none");
}

TEST(GpuLabels, TimeSlicingAppliesToMigProfilesAndNotToGpusAllInMigMode) {
  const LabelResult r = Labels(WithStrategy("mixed"), Reported(AllMigNode()),
                               {{"nvidia.com/mig-1g.10gb", {3, /*renamed=*/false}},
                                {"nvidia.com/gpu", {2, /*renamed=*/false}}});
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.product"),
            "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.replicas"), "3");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.sharing-strategy"), "time-slicing");
  // No GPU is out of MIG mode: nothing whole to share.
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "0");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "none");
}

TEST(GpuLabels, LabelValueKeepsWhatKubernetesAccepts) {
  EXPECT_EQ(LabelValue("NVIDIA A100-SXM4-80GB"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(LabelValue("  Tesla   V100\tPCIe (32GB) "), "Tesla-V100-PCIe-32GB");
  EXPECT_EQ(LabelValue("-_.GeForce RTX 4090._-"), "GeForce-RTX-4090");
  EXPECT_EQ(LabelValue("(™)"), "");
  const std::string exactly63(63, 'a');
  EXPECT_EQ(LabelValue(exactly63), exactly63);
}

TEST(GpuLabels, LongValuesAreCutWithAHashSoTheyStayApart) {
  const std::string base = "NVIDIA Some Very Long Product Name For A Future Accelerator Board";
  const std::string a = LabelValue(base + " A");
  const std::string b = LabelValue(base + " B");
  EXPECT_EQ(a.size(), 63u);
  EXPECT_EQ(b.size(), 63u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, 54), b.substr(0, 54));
  EXPECT_TRUE(
      std::regex_match(a, std::regex("[A-Za-z0-9][-A-Za-z0-9_.]{52}[A-Za-z0-9]-[0-9a-f]{8}")))
      << a;
  EXPECT_EQ(LabelValue(base + " A"), a);  // the same name, the same value
  // A cut that would end on a '-' drops it: the value still ends well.
  const std::string dashes = LabelValue(std::string(53, 'x') + "-----" + std::string(20, 'y'));
  EXPECT_TRUE(std::regex_match(dashes, std::regex("x{53}-[0-9a-f]{8}"))) << dashes;

  nvml::Inventory inv = Reported(PlainNode(1));
  inv.gpus[0].name = base + " With Extra Words";
  const LabelResult r = Labels(Config{}, inv);
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), LabelValue(inv.gpus[0].name));
  ExpectValidLabels(r.labels);
}

TEST(GpuLabels, AKeyOverTheLimitIsLeftOutWithAWarning) {
  // A MIG profile NVML names with a long suffix: the profile's key
  // "nvidia.com/mig-<profile>.<attribute>" would pass 63 characters.
  nvml::Inventory inv = Reported(AllMigNode());
  const std::string profile = "1g.10gb-with-a-rather-long-vendor-suffix-xyz";
  for (nvml::GpuRecord& g : inv.gpus) {
    g.mig_profiles = {{19, 1, 9856, 0, 0, 0, 0, StrCat("MIG ", profile)}};
  }
  const LabelResult r = Labels(WithStrategy("mixed"), inv);
  const std::string prefix = StrCat("nvidia.com/mig-", profile);
  EXPECT_EQ(r.labels.at(StrCat(prefix, ".count")), "4");  // "mig-...xyz.count" is 54
  EXPECT_EQ(r.labels.count(StrCat(prefix, ".engines.decoder")), 0u);
  EXPECT_EQ(r.labels.count(StrCat(prefix, ".multiprocessors")), 0u);
  EXPECT_THAT(Warnings(r), HasSubstr(StrCat("label ", prefix,
                                            ".engines.decoder=0 is not a valid Kubernetes label: "
                                            "left out")));
  ExpectValidLabels(r.labels);
}

TEST(GpuLabels, TextJsonAndYamlFormsSayTheSame) {
  const NodeLabels labels = {{"nvidia.com/gpu.count", "8"}, {"nvidia.com/gpu.present", "true"}};
  EXPECT_EQ(LabelsAsLines(labels), "nvidia.com/gpu.count=8\nnvidia.com/gpu.present=true\n");
  EXPECT_EQ(LabelsAsJson(labels),
            "{\n  \"nvidia.com/gpu.count\": \"8\",\n  \"nvidia.com/gpu.present\": \"true\"\n}\n");
  EXPECT_EQ(LabelsAsYaml(labels),
            "nvidia.com/gpu.count: \"8\"\nnvidia.com/gpu.present: \"true\"\n");
  EXPECT_EQ(LabelsAsYaml({}), "{}\n");
  EXPECT_EQ(LabelsAsLines({}), "");
}

}  // namespace
}  // namespace gpu_agent
