// The resource plan from inventory and config: MIG strategies, device
// selection, time-slicing subsets, MIG capability minors, socket names and
// link scores. Pure functions on hand-made inventories, so each case states
// exactly what the node has.
#include "agent/plan/resource_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/config/config_validation.h"
#include "agent/config/device_selection.h"
#include "agent/plan/endpoint_names.h"
#include "agent/plan/link_score.h"
#include "base/strings.h"
#include "deviceplugin/device_publisher.h"
#include "nvml/mig_minors.h"
#include "support/gpu_records.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using deviceplugin::PluginDevice;
using deviceplugin::ResourceSpec;
using gpu_agent::testing::AllMigNode;
using gpu_agent::testing::Gpu;
using gpu_agent::testing::Mig;
using gpu_agent::testing::MixedNode;
using gpu_agent::testing::PlainNode;
using gpu_agent::testing::TempDir;
using ::testing::HasSubstr;

const ResourceSpec* Find(const ResourcePlan& p, const std::string& name) {
  for (const ResourceSpec& r : p.resources) {
    if (r.resource_name == name) return &r;
  }
  return nullptr;
}

std::vector<std::string> Ids(const ResourceSpec& r) {
  std::vector<std::string> out;
  for (const PluginDevice& d : r.devices) out.push_back(d.id);
  return out;
}

// The device model as a generation builds it: devices.* applied once, the
// chosen GPUs expanded; the selection's warnings before the model's.
absl::StatusOr<DeviceModel> ChosenModel(const Config& c, const nvml::Inventory& inv) {
  absl::StatusOr<GpuChoice> choice = ChooseGpus(c.devices, inv.gpus);
  if (!choice.ok()) return choice.status();
  DeviceModel model = BuildDeviceModel(c, inv, *choice);
  model.warnings.insert(model.warnings.begin(), choice->warnings.begin(), choice->warnings.end());
  return model;
}

// ChosenModel, for a selection that must be valid.
DeviceModel ModelOf(const Config& c, const nvml::Inventory& inv) {
  absl::StatusOr<DeviceModel> model = ChosenModel(c, inv);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : DeviceModel{};
}

// The plan as a generation builds it, of ChosenModel, with the selection's
// and the model's warnings first (the generation logs them in that order).
absl::StatusOr<ResourcePlan> Planned(const Config& c, const nvml::Inventory& inv, bool serving) {
  absl::StatusOr<DeviceModel> model = ChosenModel(c, inv);
  if (!model.ok()) return model.status();
  absl::StatusOr<ResourcePlan> p =
      serving ? PlanResources(c, inv, *model) : PlanAdvertised(c, inv, *model);
  if (p.ok()) {
    p->warnings.insert(p->warnings.begin(), model->warnings.begin(), model->warnings.end());
  }
  return p;
}
absl::StatusOr<ResourcePlan> ServedPlan(const Config& c, const nvml::Inventory& inv) {
  return Planned(c, inv, /*serving=*/true);
}
absl::StatusOr<ResourcePlan> AdvertisedPlan(const Config& c, const nvml::Inventory& inv) {
  return Planned(c, inv, /*serving=*/false);
}

std::string Error(const absl::StatusOr<ResourcePlan>& p) {
  return p.ok() ? "<ok>" : std::string(p.status().message());
}

std::string AllWarnings(const ResourcePlan& p) { return StrJoin(p.warnings, "\n"); }

// A query that fails for want of privilege (the memory of a MIG-enabled
// GPU in an unprivileged container answers NO_PERMISSION) leaves a GPU that
// works: served healthy. Only a GPU NVML calls lost starts out unhealthy.
TEST(PlanHealthTest, OnlyALostGpuStartsOutUnhealthy) {
  nvml::Inventory inv;
  nvml::GpuRecord denied = Gpu(0);
  denied.error = "nvmlDeviceGetMemoryInfo: Insufficient Permissions";
  nvml::GpuRecord lost = Gpu(1);
  lost.error = "nvmlDeviceGetMemoryInfo: GPU is lost";
  lost.lost = true;
  inv.gpus = {denied, lost, Gpu(2)};
  inv.links.assign(3, std::vector<nvml::GpuLink>(3));
  absl::StatusOr<ResourcePlan> p = ServedPlan(Config{}, inv);
  ASSERT_TRUE(p.ok()) << Error(p);
  ASSERT_EQ(p->resources.size(), 1u);
  std::map<std::string, bool> healthy;
  for (const PluginDevice& d : p->resources[0].devices) healthy[d.id] = d.healthy;
  EXPECT_EQ(healthy, (std::map<std::string, bool>{
                         {"GPU-0aaa", true}, {"GPU-1aaa", false}, {"GPU-2aaa", true}}));
  EXPECT_EQ(ModelOf(Config{}, inv).initially_unhealthy, (std::set<std::string>{"GPU-1aaa"}));
}

TEST(PlanMigTest, NoneAdvertisesMigGpusWholeAndSaysSo) {
  Config c;
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, MixedNode());
  ASSERT_TRUE(p.ok()) << Error(p);
  ASSERT_EQ(p->resources.size(), 1u);
  EXPECT_EQ(Ids(p->resources[0]), (std::vector<std::string>{"GPU-0aaa", "GPU-1aaa"}));
  EXPECT_THAT(AllWarnings(*p), HasSubstr("GPU 0 (GPU-0aaa) is in MIG mode but flags.migStrategy "
                                         "is none: advertised whole"));
}

TEST(PlanMigTest, MixedHasOneResourceAndSocketPerProfile) {
  Config c;
  c.flags.mig_strategy = "mixed";
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, MixedNode());
  ASSERT_TRUE(p.ok()) << Error(p);
  ASSERT_EQ(p->resources.size(), 3u);
  const ResourceSpec* small = Find(*p, "nvidia.com/mig-1g.10gb");
  const ResourceSpec* big = Find(*p, "nvidia.com/mig-2g.20gb");
  const ResourceSpec* whole = Find(*p, "nvidia.com/gpu");
  ASSERT_TRUE(small && big && whole);
  EXPECT_EQ(Ids(*small), (std::vector<std::string>{"MIG-b", "MIG-c"}));
  EXPECT_EQ(Ids(*big), (std::vector<std::string>{"MIG-a"}));
  EXPECT_EQ(Ids(*whole), (std::vector<std::string>{"GPU-1aaa"}));
  EXPECT_EQ(whole->endpoint, "nvidia-gpu.sock");
  EXPECT_EQ(small->endpoint, "nvidia-mig-1g.10gb.sock");
  EXPECT_EQ(big->endpoint, "nvidia-mig-2g.20gb.sock");
  EXPECT_EQ(small->devices[0].key, (DeviceKey{"GPU-0aaa", 2, 0}));
  EXPECT_EQ(ModelOf(c, MixedNode()).gpu_uuids, (std::vector<std::string>{"GPU-0aaa", "GPU-1aaa"}));
}

TEST(PlanMigTest, IndexStrategyNamesMigDevicesGpuColonMig) {
  Config c;
  c.flags.mig_strategy = "mixed";
  c.flags.plugin.device_id_strategy = "index";
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, MixedNode());
  ASSERT_TRUE(p.ok()) << Error(p);
  EXPECT_EQ(Ids(*Find(*p, "nvidia.com/mig-1g.10gb")), (std::vector<std::string>{"0:1", "0:2"}));
  EXPECT_EQ(Ids(*Find(*p, "nvidia.com/gpu")), (std::vector<std::string>{"1"}));
}

TEST(PlanMigTest, SingleExposesMigDevicesAsTheGpuResource) {
  Config c;
  c.flags.mig_strategy = "single";
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, AllMigNode());
  ASSERT_TRUE(p.ok()) << Error(p);
  ASSERT_EQ(p->resources.size(), 1u);
  EXPECT_EQ(p->resources[0].resource_name, "nvidia.com/gpu");
  EXPECT_EQ(Ids(p->resources[0]),
            (std::vector<std::string>{"MIG-0x", "MIG-0y", "MIG-1x", "MIG-1y"}));
}

// NVIDIA's DaemonSets pass --mig-strategy=single to every node: on one with
// no GPU in MIG mode the GPUs are advertised whole, as NVIDIA's plugin does.
TEST(PlanMigTest, SingleOnANodeWithoutMigAdvertisesWholeGpus) {
  Config c;
  c.flags.mig_strategy = "single";
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, PlainNode(2));
  ASSERT_TRUE(p.ok()) << Error(p);
  ASSERT_EQ(p->resources.size(), 1u);
  EXPECT_EQ(p->resources[0].resource_name, "nvidia.com/gpu");
  EXPECT_EQ(p->resources[0].devices.size(), 2u);
  EXPECT_TRUE(p->warnings.empty());
}

TEST(PlanMigTest, SingleOnMixedMigAndWholeGpusIsAnError) {
  Config c;
  c.flags.mig_strategy = "single";
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, MixedNode());
  EXPECT_THAT(Error(p), HasSubstr("flags.migStrategy single needs every GPU in MIG mode, but "
                                  "GPU(s) 1 are not"));
  // Leaving the whole GPU out makes it valid... but GPU 0 has two profiles.
  c.devices.exclude = {"index:1"};
  p = ServedPlan(c, MixedNode());
  EXPECT_THAT(Error(p), HasSubstr("needs one MIG profile on every GPU, found 2"));
  EXPECT_THAT(Error(p), HasSubstr("1g.10gb: MIG device 0:1 (MIG-b), MIG device 0:2 (MIG-c)"));
  EXPECT_THAT(Error(p), HasSubstr("2g.20gb: MIG device 0:0 (MIG-a)"));
}

TEST(PlanMigTest, SingleWithAMigGpuWithoutDevicesIsAnError) {
  Config c;
  c.flags.mig_strategy = "single";
  nvml::Inventory inv = AllMigNode();
  inv.gpus[1].mig_devices.clear();
  EXPECT_THAT(Error(ServedPlan(c, inv)), HasSubstr("GPU 1 (GPU-1aaa) is in MIG mode with no MIG "
                                                   "devices"));
  c.flags.mig_strategy = "mixed";
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, inv);
  ASSERT_TRUE(p.ok()) << Error(p);
  EXPECT_THAT(AllWarnings(*p), HasSubstr("GPU 1 (GPU-1aaa) is in MIG mode with no MIG devices"));
}

// nvmlDeviceGetMigMode failed (not NOT_SUPPORTED, not GPU_IS_LOST): the GPU
// may be in MIG mode, where a container given it whole finds no CUDA
// device. Under a MIG strategy it is left out, in plugin mode and in what
// static mode counts, with a warning naming it and NVML's error; under
// none it is whole either way.
TEST(PlanMigTest, GpuWhoseMigModeIsUnknownIsLeftOutUnderAMigStrategy) {
  nvml::Inventory inv = AllMigNode();
  inv.gpus.push_back(Gpu(2));
  inv.gpus[2].error = inv.gpus[2].mig_mode_error = "nvmlDeviceGetMigMode: Unknown Error (999)";
  inv.links.assign(3, std::vector<nvml::GpuLink>(3));
  for (const std::string strategy : {"mixed", "single"}) {
    Config c;
    c.flags.mig_strategy = strategy;
    for (const auto& plan : {ServedPlan(c, inv), AdvertisedPlan(c, inv)}) {
      ASSERT_TRUE(plan.ok()) << strategy << ": " << Error(plan);
      for (const ResourceSpec& r : plan->resources) {
        for (const PluginDevice& d : r.devices) {
          EXPECT_NE(d.key.uuid, "GPU-2aaa") << strategy << ": advertised as " << r.resource_name;
        }
      }
      ASSERT_EQ(plan->resources.size(), 1u) << strategy;
      EXPECT_EQ(plan->resources[0].devices.size(), 4u) << strategy;  // GPU 0 and 1's MIG devices
      EXPECT_THAT(AllWarnings(*plan),
                  HasSubstr(StrCat("GPU 2 (GPU-2aaa) is not advertised: its MIG mode is unknown "
                                   "(nvmlDeviceGetMigMode: Unknown Error (999)) and "
                                   "flags.migStrategy ",
                                   strategy)));
    }
  }
  absl::StatusOr<ResourcePlan> none = ServedPlan(Config{}, inv);
  ASSERT_TRUE(none.ok()) << Error(none);
  EXPECT_EQ(Ids(none->resources[0]),
            (std::vector<std::string>{"GPU-0aaa", "GPU-1aaa", "GPU-2aaa"}));
}

TEST(PlanMigTest, ProfileWithNoNameIsLeftOutAndNamed) {
  Config c;
  c.flags.mig_strategy = "mixed";
  nvml::Inventory inv = MixedNode();
  inv.gpus[0].mig_devices[1].gpu_instance_slices = 0;  // NVML gave no attributes
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, inv);
  ASSERT_TRUE(p.ok()) << Error(p);
  EXPECT_EQ(Ids(*Find(*p, "nvidia.com/mig-1g.10gb")), (std::vector<std::string>{"MIG-c"}));
  EXPECT_THAT(AllWarnings(*p), HasSubstr("MIG device 0:1 (MIG-b) has no profile name"));
}

TEST(PlanMigTest, MigDeviceSpecsCarryParentAndCapabilityNodes) {
  TempDir dir;
  dir.Write("dev/dev/nvidia0", "");
  dir.Write("proc/driver/nvidia-caps/mig-minors",
            "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
            "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
            "gpu0/gi3/ci0/access 31\n");
  Config c;
  c.flags.mig_strategy = "mixed";
  c.flags.plugin.pass_device_specs = true;
  c.flags.nvidia_dev_root = dir.Join("dev");
  c.proc_root = dir.Join("proc");
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, MixedNode());
  ASSERT_TRUE(p.ok()) << Error(p);
  const ResourceSpec* small = Find(*p, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(small->devices[0].device_nodes,
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21",
                                      "/dev/nvidia-caps/nvidia-cap22"}));
  EXPECT_EQ(Find(*p, "nvidia.com/mig-2g.20gb")->devices[0].device_nodes,
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12",
                                      "/dev/nvidia-caps/nvidia-cap13"}));
}

TEST(PlanMigTest, MissingOrMalformedMigMinorsIsAClearError) {
  TempDir dir;
  Config c;
  c.flags.mig_strategy = "mixed";
  c.flags.plugin.pass_device_specs = true;
  c.proc_root = dir.Join("proc");
  const std::string file = dir.Join("proc/driver/nvidia-caps/mig-minors");
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())),
              HasSubstr(StrCat(file, ": cannot read it (missing)")));
  dir.Write("proc/driver/nvidia-caps/mig-minors", "config 1\ngpu0/gi1/access twelve\n");
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())),
              HasSubstr(StrCat(file, ":2: minor \"twelve\" is not a whole number")));
  dir.Write("proc/driver/nvidia-caps/mig-minors", "config 1\ngpu0/gi1/access\n");
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())),
              HasSubstr(StrCat(file, ":2: expected \"<capability> <minor>\"")));
  dir.Write("proc/driver/nvidia-caps/mig-minors", "config 1\ngpu0/gi1/access 12\n");
  EXPECT_THAT(
      Error(ServedPlan(c, MixedNode())),
      HasSubstr(StrCat("MIG device 0:0 (MIG-a): ", file, " has no entry \"gpu0/gi1/ci0/access\"")));
  dir.Write("proc/driver/nvidia-caps/mig-minors", "");
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())), HasSubstr(StrCat(file, ": empty")));
  // Without device specs the file is not needed at all.
  c.flags.plugin.pass_device_specs = false;
  EXPECT_TRUE(ServedPlan(c, MixedNode()).ok());
}

TEST(SelectorTest, ParsesEveryFormAndRefusesUnknownOnes) {
  auto kind = [](const std::string& s) {
    absl::StatusOr<GpuSelector> sel = ParseGpuSelector(s, "devices.include[0]");
    return sel.ok() ? static_cast<int>(sel->kind) : -1;
  };
  EXPECT_EQ(kind("uuid:GPU-1"), static_cast<int>(GpuSelector::Kind::kUuid));
  EXPECT_EQ(kind("GPU-1"), static_cast<int>(GpuSelector::Kind::kUuid));
  EXPECT_EQ(kind("index:3"), static_cast<int>(GpuSelector::Kind::kIndex));
  EXPECT_EQ(kind("3"), static_cast<int>(GpuSelector::Kind::kIndex));
  EXPECT_EQ(kind("pci:0x20b2"), static_cast<int>(GpuSelector::Kind::kPciDeviceId));
  EXPECT_EQ(kind("0x20b210de"), static_cast<int>(GpuSelector::Kind::kPciDeviceId));
  EXPECT_EQ(kind("name:*A100*"), static_cast<int>(GpuSelector::Kind::kName));
  auto error = [](const std::string& s) {
    absl::StatusOr<GpuSelector> sel = ParseGpuSelector(s, "devices.exclude[1]");
    return sel.ok() ? std::string("<ok>") : std::string(sel.status().message());
  };
  EXPECT_THAT(error("uid:GPU-1"),
              HasSubstr("devices.exclude[1] \"uid:GPU-1\": unknown selector kind \"uid\" (did "
                        "you mean \"uuid:\"?)"));
  EXPECT_THAT(error("A100"), HasSubstr("\"A100\": not a selector; write uuid:GPU-..."));
  EXPECT_THAT(error("index:two"), HasSubstr("an index is a whole number"));
  EXPECT_THAT(error("pci:20b2"), HasSubstr("a PCI device id is hex"));
  EXPECT_THAT(error("name:"), HasSubstr("nothing after \"name:\""));
  EXPECT_THAT(error("uuid:MIG-123"), HasSubstr("selects GPUs, not MIG devices"));
}

TEST(SelectionTest, IncludeExcludeAndCap) {
  nvml::Inventory inv;
  inv.gpus = {Gpu(0, "NVIDIA A100-SXM4-80GB"), Gpu(1, "NVIDIA H100 80GB HBM3", 0x233010de),
              Gpu(2, "NVIDIA H100 80GB HBM3", 0x233010de), Gpu(3, "NVIDIA L40S", 0x26b910de)};
  Config c;
  auto chosen = [&] {
    absl::StatusOr<ResourcePlan> p = ServedPlan(c, inv);
    EXPECT_TRUE(p.ok()) << Error(p);
    return p.ok() ? Ids(p->resources[0]) : std::vector<std::string>{};
  };
  c.devices.include = {"name:*h100*"};
  EXPECT_EQ(chosen(), (std::vector<std::string>{"GPU-1aaa", "GPU-2aaa"}));
  c.devices.include = {"pci:0x26b9", "index:0"};
  EXPECT_EQ(chosen(), (std::vector<std::string>{"GPU-0aaa", "GPU-3aaa"}));
  c.devices.include = {"pci:0x233010de"};
  c.devices.exclude = {"GPU-2aaa"};  // a pattern include narrowed by an exclude
  EXPECT_EQ(chosen(), (std::vector<std::string>{"GPU-1aaa"}));
  c.devices.include = {};
  c.devices.exclude = {"index:0"};
  c.devices.max = 2;
  EXPECT_EQ(chosen(), (std::vector<std::string>{"GPU-1aaa", "GPU-2aaa"}));
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, inv);
  EXPECT_THAT(AllWarnings(*p), HasSubstr("devices.max 2 leaves out GPU(s) 3"));
}

TEST(SelectionTest, OverlappingSelectorsAreAnError) {
  Config c;
  c.devices.include = {"index:1"};
  c.devices.exclude = {"uuid:GPU-1aaa"};
  EXPECT_THAT(Error(ServedPlan(c, PlainNode(2))),
              HasSubstr("GPU 1 (GPU-1aaa) is named by devices.include[0] \"index:1\" and excluded "
                        "by devices.exclude[0] \"uuid:GPU-1aaa\"; the two overlap"));
  c.devices.exclude = {"index:1"};
  EXPECT_THAT(std::string(ValidateConfig(c).message()),
              HasSubstr("\"index:1\" is both in devices.include[0] and in devices.exclude[0]"));
  c.devices.exclude = {"bogus:1"};
  EXPECT_THAT(std::string(ValidateConfig(c).message()),
              HasSubstr("devices.exclude[0] \"bogus:1\": unknown selector kind"));
}

TEST(SelectionTest, SelectorMatchingNothingIsNamedAndTheRestServed) {
  Config c;
  c.devices.include = {"index:0", "uuid:GPU-nothere"};
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, PlainNode(2));
  ASSERT_TRUE(p.ok()) << Error(p);
  EXPECT_EQ(Ids(p->resources[0]), (std::vector<std::string>{"GPU-0aaa"}));
  EXPECT_THAT(AllWarnings(*p), HasSubstr("devices.include[1] \"uuid:GPU-nothere\" matches no GPU"));
  EXPECT_EQ(ModelOf(c, PlainNode(2)).gpu_uuids,
            (std::vector<std::string>{"GPU-0aaa"}));  // only chosen GPUs watched
}

TimeSlicingResource Share(std::string name, int replicas,
                          std::vector<std::string> devices = {"all"}, std::string rename = "") {
  TimeSlicingResource r;
  r.name = std::move(name);
  r.replicas = replicas;
  r.devices = std::move(devices);
  r.rename = std::move(rename);
  return r;
}

TEST(SharingTest, SubsetByListSharesOnlyThoseAndTheRestStayWhole) {
  Config c;
  c.sharing.time_slicing.resources = {
      Share("nvidia.com/gpu", 2, {"1", "GPU-3aaa"}, "nvidia.com/gpu.shared")};
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, PlainNode(4));
  ASSERT_TRUE(p.ok()) << Error(p);
  ASSERT_EQ(p->resources.size(), 2u);
  const ResourceSpec* whole = Find(*p, "nvidia.com/gpu");
  const ResourceSpec* shared = Find(*p, "nvidia.com/gpu.shared");
  EXPECT_EQ(Ids(*whole), (std::vector<std::string>{"GPU-0aaa", "GPU-2aaa"}));
  EXPECT_FALSE(whole->replicated);
  EXPECT_EQ(Ids(*shared),
            (std::vector<std::string>{"GPU-1aaa::0", "GPU-1aaa::1", "GPU-3aaa::0", "GPU-3aaa::1"}));
  EXPECT_TRUE(shared->replicated);
  EXPECT_EQ(whole->endpoint, "nvidia-gpu.sock");
  EXPECT_EQ(shared->endpoint, "nvidia-gpu.shared.sock");
}

// The replicas are the model's: each unit says how many it is advertised
// as, and the resource says under which name; the plan reads them.
TEST(SharingTest, TheModelCarriesEachUnitsReplicas) {
  Config c;
  c.sharing.time_slicing.resources = {
      Share("nvidia.com/gpu", 3, {"1", "GPU-3aaa"}, "nvidia.com/gpu.shared")};
  const DeviceModel model = ModelOf(c, PlainNode(4));
  std::vector<int> replicas;
  for (const DeviceUnit& u : model.units) replicas.push_back(u.replicas);
  EXPECT_EQ(replicas, (std::vector<int>{1, 3, 1, 3}));
  const TimeSlicedResource* t = model.TimeSlicingOf("nvidia.com/gpu");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shared_resource, "nvidia.com/gpu.shared");
  EXPECT_EQ(t->replicas, 3);
  EXPECT_EQ(model.units[1].ReplicaId("GPU-1aaa", 2), "GPU-1aaa::2");
  EXPECT_EQ(model.units[0].ReplicaId("GPU-0aaa", 0), "GPU-0aaa");
  EXPECT_TRUE(model.sharing_error.ok());
}

TEST(SharingTest, SubsetByCountWithRenameByDefault) {
  Config c;
  c.sharing.time_slicing.rename_by_default = true;
  TimeSlicingResource r = Share("nvidia.com/gpu", 3, {});
  r.device_count = 1;
  c.sharing.time_slicing.resources = {r};
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, PlainNode(3));
  ASSERT_TRUE(p.ok()) << Error(p);
  EXPECT_EQ(Ids(*Find(*p, "nvidia.com/gpu.shared")),
            (std::vector<std::string>{"GPU-0aaa::0", "GPU-0aaa::1", "GPU-0aaa::2"}));
  EXPECT_EQ(Ids(*Find(*p, "nvidia.com/gpu")), (std::vector<std::string>{"GPU-1aaa", "GPU-2aaa"}));
}

// Every replica is a device the kubelet keeps and streams: a resource that
// would list more than kMaxDevicesPerResource is refused with the count
// (50,000 replicas made the agent register again and again, for good).
TEST(SharingTest, AResourceOfTooManyReplicasIsRefusedWithTheCount) {
  Config c;
  c.sharing.time_slicing.resources = {Share("nvidia.com/gpu", kMaxTimeSlicingReplicas)};
  ASSERT_TRUE(ServedPlan(c, PlainNode(16)).ok());  // 16 x 1,024 = 16,384: the bound itself
  EXPECT_THAT(Error(ServedPlan(c, PlainNode(17))),
              HasSubstr("sharing.timeSlicing.resources[0]: 17 devices x 1024 replicas would list "
                        "17408 nvidia.com/gpu devices to the kubelet, more than the 16384 one "
                        "resource may have"));
}

TEST(SharingTest, SubsetWithoutANewNameIsAnError) {
  Config c;
  c.sharing.time_slicing.resources = {Share("nvidia.com/gpu", 2, {"0"})};
  EXPECT_THAT(Error(ServedPlan(c, PlainNode(2))),
              HasSubstr("sharing.timeSlicing.resources[0].devices shares 1 of 2 nvidia.com/gpu "
                        "devices: the replicas need a name of their own"));
}

TEST(SharingTest, AllSharedKeepsTheSingleSocket) {
  Config c;
  c.sharing.time_slicing.resources = {Share("nvidia.com/gpu", 2)};
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, PlainNode(2));
  ASSERT_TRUE(p.ok()) << Error(p);
  ASSERT_EQ(p->resources.size(), 1u);
  EXPECT_EQ(p->resources[0].endpoint, "nvidia-gpu.sock");
  EXPECT_EQ(p->resources[0].devices.size(), 4u);
}

TEST(SharingTest, MigResourceIsSharedByMigUuidOrIndex) {
  Config c;
  c.flags.mig_strategy = "mixed";
  c.sharing.time_slicing.resources = {
      Share("nvidia.com/mig-1g.10gb", 2, {"0:1"}, "nvidia.com/mig-1g.10gb.shared")};
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, MixedNode());
  ASSERT_TRUE(p.ok()) << Error(p);
  EXPECT_EQ(Ids(*Find(*p, "nvidia.com/mig-1g.10gb.shared")),
            (std::vector<std::string>{"MIG-b::0", "MIG-b::1"}));
  EXPECT_EQ(Ids(*Find(*p, "nvidia.com/mig-1g.10gb")), (std::vector<std::string>{"MIG-c"}));
}

TEST(SharingTest, ReplicasOnAMigDeviceWhereNotAllowed) {
  Config c;
  c.flags.mig_strategy = "mixed";
  // A MIG device named under the whole-GPU resource.
  c.sharing.time_slicing.resources = {Share("nvidia.com/gpu", 2, {"MIG-b"}, "nvidia.com/x")};
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())),
              HasSubstr("\"MIG-b\" is MIG device 0:1 (MIG-b), advertised as "
                        "nvidia.com/mig-1g.10gb, not nvidia.com/gpu"));
  // A MIG-mode GPU named where its MIG devices are the units.
  c.sharing.time_slicing.resources = {
      Share("nvidia.com/mig-1g.10gb", 2, {"0"}, "nvidia.com/mig-1g.10gb.shared")};
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())),
              HasSubstr("\"0\" is GPU 0, which is in MIG mode: replicas go on its MIG devices"));
  // Under migStrategy none there are no MIG devices to share.
  c.flags.mig_strategy = "none";
  c.sharing.time_slicing.resources = {Share("nvidia.com/gpu", 2, {"0:2"}, "nvidia.com/x")};
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())),
              HasSubstr("\"0:2\" is a MIG device, and nvidia.com/gpu has no MIG devices under "
                        "flags.migStrategy none; replicas are not allowed on it here"));
  c.sharing.time_slicing.resources = {Share("nvidia.com/gpu", 2, {"7"}, "nvidia.com/x")};
  EXPECT_THAT(Error(ServedPlan(c, MixedNode())),
              HasSubstr("\"7\" matches no nvidia.com/gpu device"));
}

TEST(SharingTest, EntryForAResourceThisNodeLacksIsOnlyAWarning) {
  Config c;
  c.flags.mig_strategy = "mixed";
  c.sharing.time_slicing.resources = {Share("nvidia.com/mig-3g.40gb", 2)};
  absl::StatusOr<ResourcePlan> p = ServedPlan(c, MixedNode());
  ASSERT_TRUE(p.ok()) << Error(p);
  EXPECT_THAT(AllWarnings(*p), HasSubstr("no device on this node is advertised as "
                                         "nvidia.com/mig-3g.40gb"));
}

TEST(SharingTest, MigResourceNamesNeedMixed) {
  Config c;
  c.sharing.time_slicing.resources = {Share("nvidia.com/mig-1g.10gb", 2)};
  EXPECT_THAT(
      std::string(ValidateConfig(c).message()),
      HasSubstr("is a MIG profile resource, advertised only under flags.migStrategy mixed"));
  c.flags.mig_strategy = "mixed";
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(HealthLedgerTest, InstanceAndGpuOutagesAreKeptApart) {
  ResourceSpec spec;
  spec.resource_name = "nvidia.com/mig-1g.10gb";
  spec.endpoint = "x.sock";
  for (int gi : {1, 2}) {
    PluginDevice d;
    d.id = StrCat("MIG-", gi);
    d.gpu_id = d.id;
    d.key = {"GPU-0", gi, 0};
    d.physical = gi - 1;
    spec.devices.push_back(d);
  }
  spec.link_score.assign(2, std::vector<int>(2, 0));
  deviceplugin::DevicePublisher pub(spec);
  auto healthy = [&] {
    std::string out;
    for (const PluginDevice& d : pub.Current()->devices) out += d.healthy ? "H" : "U";
    return out;
  };
  EXPECT_TRUE(pub.SetHealth({"GPU-0", 2, 0}, false));  // instance-scoped XID
  EXPECT_EQ(healthy(), "HU");
  EXPECT_TRUE(pub.SetHealth({"GPU-0"}, false));  // GPU-wide XID
  EXPECT_EQ(healthy(), "UU");
  EXPECT_TRUE(pub.SetHealth({"GPU-0"}, true));  // the GPU recovers; the instance is still out
  EXPECT_EQ(healthy(), "HU");
  EXPECT_FALSE(pub.SetHealth({"GPU-1"}, false));  // another GPU: nothing here changes
  EXPECT_TRUE(pub.SetHealth({"GPU-0", 2, 0}, true));
  EXPECT_EQ(healthy(), "HH");
  EXPECT_TRUE(pub.SetHealth({"GPU-0", 1}, false));  // a GPU instance covers its compute instances
  EXPECT_EQ(healthy(), "UH");
}

TEST(MigMinorsTest, DuplicateEntryIsNamed) {
  absl::StatusOr<nvml::MigMinors> m =
      nvml::MigMinors::Parse("config 1\nconfig 2\n", "/proc/driver/nvidia-caps/mig-minors");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("mig-minors:2: \"config\" is listed twice"));
}

// The table an H100 host's driver (580.159.04) wrote, copied verbatim:
// 32 GPUs x 15 GPU instances x 8 compute instances, 4322 lines.
TEST(MigMinorsTest, ReadsARealDriverTable) {
  TempDir dir;
  dir.Write("proc/driver/nvidia-caps/mig-minors",
            testing::ReadFile(testing::SourceDir() + "/tests/fixtures/proc/mig-minors"));
  absl::StatusOr<nvml::MigMinors> m = nvml::MigMinors::Read(dir.Join("proc"));
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::vector<std::string>> nodes = m->DeviceNodes(0, 2, 0);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(*nodes, (std::vector<std::string>{"/dev/nvidia-caps/nvidia-cap21",
                                              "/dev/nvidia-caps/nvidia-cap22"}));
  nodes = m->DeviceNodes(1, 2, 0);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(*nodes, (std::vector<std::string>{"/dev/nvidia-caps/nvidia-cap156",
                                              "/dev/nvidia-caps/nvidia-cap157"}));
  EXPECT_THAT(std::string(m->DeviceNodes(32, 1, 0).status().message()),
              HasSubstr("has no entry \"gpu32/gi1/access\""));
}

// The main resource keeps the configured socket (or the only resource
// does, whatever its name); the others get names from theirs, made unique.
TEST(EndpointNamesTest, ConfiguredForTheMainDerivedAndUniqueForTheRest) {
  EXPECT_EQ(AssignEndpoints(
                {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "example.org/a b", "example.org/a_b"},
                "nvidia.com/gpu", "nvidia-gpu.sock"),
            (std::vector<std::string>{"nvidia-gpu.sock", "nvidia-mig-1g.10gb.sock",
                                      "example-a_b.sock", "example-a_b-2.sock"}));
  EXPECT_EQ(AssignEndpoints({"nvidia.com/gpu.shared"}, "nvidia.com/gpu", "nvidia-gpu.sock"),
            (std::vector<std::string>{"nvidia-gpu.sock"}));
  // A derived name never takes the configured one.
  EXPECT_EQ(AssignEndpoints({"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"}, "nvidia.com/gpu",
                            "nvidia-mig-1g.10gb.sock"),
            (std::vector<std::string>{"nvidia-mig-1g.10gb.sock", "nvidia-mig-1g.10gb-2.sock"}));
  EXPECT_EQ(DerivedEndpoint("nvidia.com/gpu"), "nvidia-gpu.sock");
}

TEST(LinkScoreTest, NvlinksThenPcieDistanceAndOneGpuAboveAll) {
  EXPECT_EQ(LinkScore({.nvlinks = 2, .pcie_level = 50}), 260);
  EXPECT_EQ(LinkScore({.nvlinks = 0, .pcie_level = 10}), 50);
  EXPECT_EQ(LinkScore({.nvlinks = 0, .pcie_level = 50}), 10);
  EXPECT_EQ(LinkScore({}), 0);
  nvml::Inventory inv = PlainNode(2);
  inv.links.assign(2, std::vector<nvml::GpuLink>(2));
  inv.links[0][1] = inv.links[1][0] = {.nvlinks = 4, .pcie_level = 0};
  // Units: two MIG devices of GPU 0, then GPU 1, then a GPU with no links known.
  const std::vector<std::vector<int>> m = LinkScoreMatrix(inv, {0, 0, 1, 7});
  EXPECT_EQ(m, (std::vector<std::vector<int>>{
                   {0, 10000, 460, 0}, {10000, 0, 460, 0}, {460, 460, 0, 0}, {0, 0, 0, 0}}));
}

}  // namespace
}  // namespace gpu_agent
