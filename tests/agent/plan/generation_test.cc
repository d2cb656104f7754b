// One generation per start and reload: the GPUs chosen once, and every name
// Allocate returns resolved by the CDI spec built with it, for every
// device-list, device-ID and MIG strategy, with and without time-slicing.
#include "agent/plan/generation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "base/strings.h"
#include "support/allocate_each_id.h"
#include "support/gpu_records.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using ::testing::HasSubstr;

constexpr char kDriver[] = "550.54.15";

// The inventories of support/gpu_records.h as NVML reports them on a driver
// (the driver's version is what its files are found by).
nvml::Inventory MixedNode() {
  nvml::Inventory inv = testing::MixedNode();
  inv.driver_version = kDriver;
  return inv;
}

nvml::Inventory AllMigNode() {
  nvml::Inventory inv = testing::AllMigNode();
  inv.driver_version = kDriver;
  inv.links.assign(2, std::vector<nvml::GpuLink>(2));
  return inv;
}

class GenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteFakeDriverRoot(dir_.Join("driver"), kDriver));
    testing::WriteFakeDevRoot(dir_.Join("dev"), {0, 1},
                              {12, 13, 21, 22, 30, 31, 111, 112, 121, 122},
                              /*char_devices=*/false);
    dir_.Write("proc/driver/nvidia-caps/mig-minors",
               "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
               "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
               "gpu0/gi3/ci0/access 31\ngpu1/gi1/access 111\ngpu1/gi1/ci0/access 112\n"
               "gpu1/gi2/access 121\ngpu1/gi2/ci0/access 122\n");
  }

  Config Base() const {
    Config c;
    c.flags.nvidia_driver_root = dir_.Join("driver");
    c.flags.nvidia_dev_root = dir_.Join("dev");
    c.proc_root = dir_.Join("proc");
    c.flags.plugin.nvidia_ctk_path = "";  // no hooks: the spec mounts the links
    c.cdi.spec_dir = dir_.Join("cdi");
    return c;
  }

  testing::TempDir dir_;
};

std::string Error(const absl::StatusOr<std::shared_ptr<const Generation>>& g) {
  return g.ok() ? "<ok>" : std::string(g.status().message());
}

TEST_F(GenerationTest, EveryNameAllocateReturnsIsInTheCdiSpec) {
  struct MigCase {
    std::string strategy;
    nvml::Inventory inventory;
  };
  const std::vector<MigCase> migs = {
      {"none", MixedNode()}, {"mixed", MixedNode()}, {"single", AllMigNode()}};
  size_t names_checked = 0;
  for (const MigCase& mig : migs) {
    for (const char* list : {"cdi-cri", "cdi-annotations"}) {
      for (const char* id_strategy : {"uuid", "index"}) {
        for (int replicas : {1, 2}) {
          SCOPED_TRACE(StrCat("migStrategy=", mig.strategy, " deviceListStrategy=", list,
                              " deviceIDStrategy=", id_strategy, " replicas=", replicas));
          LoadedConfig loaded;
          loaded.config = Base();
          loaded.config.flags.mig_strategy = mig.strategy;
          loaded.config.flags.plugin.device_list_strategy = {list};
          loaded.config.flags.plugin.device_id_strategy = id_strategy;
          loaded.config.flags.plugin.pass_device_specs = true;
          if (replicas > 1) {
            for (const char* r : {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"}) {
              TimeSlicingResource t;
              t.name = r;
              t.replicas = replicas;
              t.devices = {"all"};
              loaded.config.sharing.time_slicing.resources.push_back(t);
            }
          }
          absl::StatusOr<std::shared_ptr<const Generation>> gen =
              BuildGeneration(loaded, mig.inventory, GenerationOptionsFor(loaded.config));
          ASSERT_TRUE(gen.ok()) << Error(gen);
          ASSERT_TRUE((*gen)->cdi.has_value()) << "a cdi-* strategy with a spec folder: a spec";
          ASSERT_FALSE((*gen)->plan.resources.empty());
          names_checked += testing::AllocateEachId(**gen).names_checked;
        }
      }
    }
  }
  // 3 MIG strategies x 2 lists x 2 ID strategies x (1 + 2 replicas): each
  // device of each resource at least once.
  EXPECT_GE(names_checked, 3u * 2 * 2 * 3 * 2);
}

// devices.* is applied once and every part of the generation reads it: the
// plan serves, the labels count and the CDI spec names only the chosen GPU.
TEST_F(GenerationTest, TheGpusChosenOnceAreTheOnlyOnesAnyPartSees) {
  LoadedConfig loaded;
  loaded.config = Base();
  loaded.config.devices.include = {"index:1", "uuid:GPU-9nothing"};
  loaded.config.flags.plugin.device_list_strategy = {"cdi-cri"};
  absl::StatusOr<std::shared_ptr<const Generation>> gen =
      BuildGeneration(loaded, MixedNode(), GenerationOptionsFor(loaded.config));
  ASSERT_TRUE(gen.ok()) << Error(gen);
  const Generation& g = **gen;
  EXPECT_EQ(g.choice.chosen, std::vector<size_t>{1});
  ASSERT_EQ(g.plan.resources.size(), 1u);
  ASSERT_EQ(g.plan.resources[0].devices.size(), 1u);
  EXPECT_EQ(g.plan.resources[0].devices[0].id, "GPU-1aaa");
  EXPECT_EQ(g.labels.labels.at("nvidia.com/gpu.count"), "1");
  std::set<std::string> names;
  for (const cdi::Device& d : g.cdi->spec.devices) names.insert(d.name);
  EXPECT_EQ(names, (std::set<std::string>{"GPU-1aaa", "1", "all"}));
  // The selector that matched nothing is said once, by the generation.
  size_t said = 0;
  for (const std::string& w : g.warnings) said += w.find("GPU-9nothing") != std::string::npos;
  EXPECT_EQ(said, 1u);
}

// The labels describe the model's GPUs: a GPU the model leaves out (here
// one NVML gave no UUID) is counted in no label, in every mode.
TEST_F(GenerationTest, AGpuTheModelLeavesOutIsNotLabelled) {
  nvml::Inventory inv = testing::PlainNode(2);
  inv.driver_version = kDriver;
  inv.links.assign(2, std::vector<nvml::GpuLink>(2));
  inv.gpus[1].uuid.clear();
  for (const char* mode : {"plugin", "static", "dra"}) {
    SCOPED_TRACE(mode);
    LoadedConfig loaded;
    loaded.config = Base();
    loaded.config.mode = mode;
    absl::StatusOr<std::shared_ptr<const Generation>> gen =
        BuildGeneration(loaded, inv, GenerationOptionsFor(loaded.config));
    ASSERT_TRUE(gen.ok()) << Error(gen);
    const Generation& g = **gen;
    EXPECT_EQ(g.choice.chosen, (std::vector<size_t>{0, 1}));
    EXPECT_EQ(g.model.gpus, std::vector<size_t>{0});
    EXPECT_EQ(g.labels.labels.at("nvidia.com/gpu.count"), "1");
  }
}

// The labels' replicas are the model's time-slicing: what is advertised,
// shared as a resource of its own (rename, renameByDefault) or not, and
// per MIG profile under migStrategy mixed.
TEST_F(GenerationTest, LabelsTellTheModelsTimeSlicing) {
  struct Case {
    const char* what;
    std::string rename;
    bool rename_by_default;
    const char* product;
  };
  for (const Case& c : {Case{"shared in place", "", false, "NVIDIA-A100-SXM4-80GB-SHARED"},
                        Case{"renamed", "nvidia.com/gpu.shared", false, "NVIDIA-A100-SXM4-80GB"},
                        Case{"renamed by default", "", true, "NVIDIA-A100-SXM4-80GB"}}) {
    SCOPED_TRACE(c.what);
    LoadedConfig loaded;
    loaded.config = Base();
    loaded.config.sharing.time_slicing.resources = {{"nvidia.com/gpu", 4, c.rename, {"all"}, 0}};
    loaded.config.sharing.time_slicing.rename_by_default = c.rename_by_default;
    nvml::Inventory inv = testing::PlainNode(2);
    inv.driver_version = kDriver;
    inv.links.assign(2, std::vector<nvml::GpuLink>(2));
    absl::StatusOr<std::shared_ptr<const Generation>> gen =
        BuildGeneration(loaded, inv, GenerationOptionsFor(loaded.config));
    ASSERT_TRUE(gen.ok()) << Error(gen);
    const NodeLabels& l = (*gen)->labels.labels;
    EXPECT_EQ(l.at("nvidia.com/gpu.product"), c.product);
    EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "4");
    EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
  }
  LoadedConfig loaded;
  loaded.config = Base();
  loaded.config.flags.mig_strategy = "mixed";
  loaded.config.sharing.time_slicing.resources = {{"nvidia.com/mig-1g.10gb", 3, "", {"all"}, 0}};
  absl::StatusOr<std::shared_ptr<const Generation>> gen =
      BuildGeneration(loaded, AllMigNode(), GenerationOptionsFor(loaded.config));
  ASSERT_TRUE(gen.ok()) << Error(gen);
  const NodeLabels& l = (*gen)->labels.labels;
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.replicas"), "3");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "0");
}

TEST_F(GenerationTest, StaticModeAdvertisesAndBuildsNoCdiSpec) {
  LoadedConfig loaded;
  loaded.config = Base();
  loaded.config.mode = "static";
  loaded.config.flags.plugin.device_list_strategy = {"cdi-cri"};
  const GenerationOptions o = GenerationOptionsFor(loaded.config);
  EXPECT_EQ(o.plan, GenerationOptions::Plan::kAdvertise);
  absl::StatusOr<std::shared_ptr<const Generation>> gen = BuildGeneration(loaded, MixedNode(), o);
  ASSERT_TRUE(gen.ok()) << Error(gen);
  EXPECT_FALSE((*gen)->cdi.has_value());
}

// A spec the node cannot back (the driver's libraries missing) fails the
// generation, naming the CDI spec, so no Allocate would name devices no
// runtime can resolve.
TEST_F(GenerationTest, ACdiSpecThatCannotBeBuiltFailsTheGeneration) {
  LoadedConfig loaded;
  loaded.config = Base();
  loaded.config.flags.nvidia_driver_root = dir_.Join("no-driver");
  loaded.config.flags.plugin.device_list_strategy = {"cdi-annotations"};
  absl::StatusOr<std::shared_ptr<const Generation>> gen =
      BuildGeneration(loaded, MixedNode(), GenerationOptionsFor(loaded.config));
  ASSERT_FALSE(gen.ok());
  EXPECT_THAT(std::string(gen.status().message()), HasSubstr("cannot generate the CDI spec"));
}

}  // namespace
}  // namespace gpu_agent
