// The device model and its projections: the chosen GPUs expanded once, and
// the device plugin's resources, the CDI spec, DRA's devices and static
// mode's counts all read from it. For every NVML fixture the stand-in serves,
// every device DRA publishes prepares (through the real ClaimPreparer),
// every ID Allocate returns has its CDI name, and static mode counts what
// plugin mode serves.
#include "agent/plan/device_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "agent/plan/dra_plan.h"
#include "agent/plan/generation.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "dra/claim_preparer.h"
#include "fixture.h"
#include "in_process_nvml.h"
#include "support/allocate_each_id.h"
#include "support/gpu_records.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using dra::AttributeValue;
using dra::DraDevice;
using gpu_agent::testing::Gpu;
using gpu_agent::testing::TempDir;
using ::testing::HasSubstr;

std::vector<DraDevice> DraDevices(const Config& c, const nvml::Inventory& inv) {
  std::vector<size_t> all;
  for (size_t i = 0; i < inv.gpus.size(); ++i) all.push_back(i);
  return DraDevicesOf(BuildDeviceModel(c, inv, GpuChoice{all, {}}), inv);
}

nvml::Inventory OneA100() {
  nvml::Inventory inv;
  inv.driver_version = "535.129.03";
  inv.cuda_driver_version = "12.2";
  nvml::GpuRecord g = Gpu(0);
  g.pci_bus_id = "00000000:3B:00.0";
  g.numa_node = 1;
  g.cc_major = 8;
  g.cc_minor = 0;
  g.brand = "Nvidia";
  g.architecture = "ampere";
  inv.gpus = {g};
  return inv;
}

// sysfs's device link for 0000:3b:00.0, under root complex pci0000:3a.
void WritePcieLink(const TempDir& dir) {
  dir.Write("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/class", "0x030200\n");
  dir.Write("sys/bus/pci/devices/.keep", "");
  ASSERT_EQ(::symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
                      dir.Join("sys/bus/pci/devices/0000:3b:00.0").c_str()),
            0);
}

TEST(DeviceModelTest, AWholeGpuCarriesTypedAttributesAndCapacity) {
  TempDir dir;
  WritePcieLink(dir);
  Config c;
  c.sysfs_root = dir.Join("sys");
  std::vector<DraDevice> devices = DraDevices(c, OneA100());
  ASSERT_EQ(devices.size(), 1u);
  const DraDevice& d = devices[0];
  EXPECT_EQ(d.name, "gpu-0000-3b-00-0");  // its PCI address
  EXPECT_EQ(d.uuid, "GPU-0aaa");
  EXPECT_EQ(d.key, DeviceKey::Gpu("GPU-0aaa"));
  const auto& a = d.attributes;
  EXPECT_EQ(a.at("uuid"), AttributeValue::String("GPU-0aaa"));
  EXPECT_EQ(a.at("type"), AttributeValue::String("gpu"));
  EXPECT_EQ(a.at("productName"), AttributeValue::String("NVIDIA A100-SXM4-80GB"));
  EXPECT_EQ(a.at("brand"), AttributeValue::String("Nvidia"));
  EXPECT_EQ(a.at("architecture"), AttributeValue::String("ampere"));
  EXPECT_EQ(a.count("index"), 0u);  // NVML's order, which a drained or lost GPU changes
  EXPECT_EQ(a.at("minor"), AttributeValue::Int(0));
  EXPECT_EQ(a.at("cudaComputeCapability"), AttributeValue::Version("8.0.0"));
  // Semantic versions: no leading zeros, three numbers.
  EXPECT_EQ(a.at("driverVersion"), AttributeValue::Version("535.129.3"));
  EXPECT_EQ(a.at("cudaDriverVersion"), AttributeValue::Version("12.2.0"));
  EXPECT_EQ(a.at("resource.kubernetes.io/pciBusID"), AttributeValue::String("0000:3b:00.0"));
  EXPECT_EQ(a.at("resource.kubernetes.io/pcieRoot"), AttributeValue::String("pci0000:3a"));
  EXPECT_EQ(a.at("resource.kubernetes.io/numaNode"), AttributeValue::Int(1));
  EXPECT_EQ(d.capacity.at("memory"), "80Gi");  // as the API server writes it back
}

TEST(DeviceModelTest, NumaNodeAndPcieRootOnlyWhereKnown) {
  nvml::Inventory inv = OneA100();
  inv.gpus[0].numa_node = -1;
  TempDir dir;  // no sysfs device link
  Config c;
  c.sysfs_root = dir.path();
  const DraDevice d = DraDevices(c, inv).at(0);
  EXPECT_EQ(d.attributes.count("resource.kubernetes.io/numaNode"), 0u);
  EXPECT_EQ(d.attributes.count("resource.kubernetes.io/pcieRoot"), 0u);
}

TEST(DeviceModelTest, MigDevicesReplaceTheirGpuWithDnsLabelNames) {
  nvml::Inventory inv = testing::MixedNode();
  inv.gpus[0].pci_bus_id = "00000000:07:00.0";
  inv.gpus[0].mig_devices[1].multiprocessors = 14;
  Config c;
  c.flags.mig_strategy = "mixed";
  std::vector<DraDevice> devices = DraDevices(c, inv);
  ASSERT_EQ(devices.size(), 4u);
  // The GPU's name, the profile, the GPU and compute instance ids.
  EXPECT_EQ(devices[0].name, "gpu-0000-07-00-0-mig-2g-20gb-1-0");
  EXPECT_EQ(devices[1].name, "gpu-0000-07-00-0-mig-1g-10gb-2-0");
  EXPECT_EQ(devices[1].attributes.at("type"), AttributeValue::String("mig"));
  EXPECT_EQ(devices[1].attributes.at("profile"), AttributeValue::String("1g.10gb"));
  EXPECT_EQ(devices[1].attributes.at("uuid"), AttributeValue::String("MIG-b"));
  EXPECT_EQ(devices[1].attributes.at("parentUUID"), AttributeValue::String("GPU-0aaa"));
  EXPECT_EQ(devices[1].capacity.at("memory"), "9856Mi");
  EXPECT_EQ(devices[1].capacity.at("multiprocessors"), "14");
  EXPECT_EQ(devices[1].key, (DeviceKey{"GPU-0aaa", 2, 0}));
  EXPECT_EQ(devices[3].name, "gpu-1aaa");  // no PCI address: its UUID
  for (const DraDevice& d : devices) {
    EXPECT_TRUE(ValidateNodeName(d.name).ok()) << d.name;  // a DNS label is a subdomain
    EXPECT_EQ(d.name.find('.'), std::string::npos) << d.name;
    EXPECT_LE(d.name.size(), 63u);
  }
  // Under migStrategy none the MIG-enabled GPU is offered whole.
  c.flags.mig_strategy = "none";
  EXPECT_EQ(DraDevices(c, inv).size(), 2u);
}

// A GPU keeps its name whatever NVML's index or the minor (a GPU before it
// drained, lost or bound to vfio-pci renumbers both): the name goes with
// the PCI address, which only moving the card changes.
TEST(DeviceModelTest, ANameStaysWithItsGpuWhenTheGpusBeforeItGo) {
  nvml::Inventory inv = testing::PlainNode(3);
  const char* buses[] = {"00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0"};
  for (unsigned i = 0; i < 3; ++i) inv.gpus[i].pci_bus_id = buses[i];
  const std::vector<DraDevice> before = DraDevices(Config{}, inv);
  // GPU 0 drained: NVML lists two, renumbered 0 and 1, minors moved on.
  nvml::Inventory after_drain;
  after_drain.gpus = {inv.gpus[1], inv.gpus[2]};
  for (unsigned i = 0; i < 2; ++i) {
    after_drain.gpus[i].index = i;
    after_drain.gpus[i].minor = static_cast<int>(i);
  }
  const std::vector<DraDevice> after = DraDevices(Config{}, after_drain);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].name, before[1].name);
  EXPECT_EQ(after[0].uuid, before[1].uuid);
  EXPECT_EQ(after[1].name, before[2].name);
  EXPECT_EQ(after[1].name, "gpu-0000-47-00-0");
  // A real UUID as the name where there is no PCI address: a DNS label.
  nvml::Inventory no_bus;
  no_bus.gpus = {Gpu(0)};
  no_bus.gpus[0].uuid = "GPU-ED474D47-acdb-5d33-bc5a-38d1d781b523";
  EXPECT_EQ(DraDevices(Config{}, no_bus).at(0).name, "gpu-ed474d47-acdb-5d33-bc5a-38d1d781b523");
}

constexpr char kDriver[] = "550.54.15";

// A driver root, a dev root with `minors` and `caps`, and a mig-minors file
// listing GPU 0's three GPU instances of testing::MixedNode.
class ProjectionTest : public ::testing::Test {
 protected:
  void Node(const std::string& version, const std::vector<int>& minors,
            const std::vector<int>& caps, const std::string& mig_minors) {
    ASSERT_TRUE(testing::WriteFakeDriverRoot(dir_.Join("driver"), version));
    testing::WriteFakeDevRoot(dir_.Join("dev"), minors, caps, /*char_devices=*/false);
    dir_.Write("proc/driver/nvidia-caps/mig-minors", mig_minors);
  }

  Config Base(const std::string& mode, const std::string& mig) const {
    Config c;
    c.mode = mode;
    c.node_name = "node-a";
    c.flags.mig_strategy = mig;
    c.flags.nvidia_driver_root = dir_.Join("driver");
    c.flags.nvidia_dev_root = dir_.Join("dev");
    c.proc_root = dir_.Join("proc");
    c.sysfs_root = dir_.Join("sys");
    c.flags.plugin.nvidia_ctk_path = "";
    c.flags.plugin.device_list_strategy = {"cdi-cri"};
    c.flags.plugin.pass_device_specs = true;
    c.cdi.spec_dir = dir_.Join("cdi");
    return c;
  }

  absl::StatusOr<std::shared_ptr<const Generation>> Build(const Config& c,
                                                          const nvml::Inventory& inv) {
    LoadedConfig loaded;
    loaded.config = c;
    return BuildGeneration(loaded, inv, GenerationOptionsFor(c));
  }

  // What NVML, serving `fixture`, tells the inventory.
  absl::StatusOr<nvml::Inventory> Discover(const fake_nvml::Fixture& fixture) const {
    fake_nvml::InProcessNvml fake(fixture);
    std::unique_ptr<nvml::NvmlLibrary> lib = fake.Library();
    if (absl::Status s = lib->Init(); !s.ok()) return s;
    return nvml::DiscoverInventory(*lib, dir_.Join("sys"));
  }

  // The node's files for `inv` (those of a node before removed): each GPU's
  // device node, each MIG device's capability nodes listed in mig-minors.
  void NodeOf(const nvml::Inventory& inv) {
    std::vector<int> minors, caps;
    std::string mig_minors = "config 1\nmonitor 2\n";
    int cap = 10;
    for (const nvml::GpuRecord& g : inv.gpus) {
      if (g.minor >= 0) minors.push_back(g.minor);
      for (const nvml::MigRecord& m : g.mig_devices) {
        StrAppend(&mig_minors, "gpu", g.minor, "/gi", m.gpu_instance_id, "/access ", cap, "\n",
                  "gpu", g.minor, "/gi", m.gpu_instance_id, "/ci", m.compute_instance_id,
                  "/access ", cap + 1, "\n");
        caps.push_back(cap);
        caps.push_back(cap + 1);
        cap += 2;
      }
    }
    for (const char* made : {"driver", "dev", "proc", "cdi"}) {
      std::filesystem::remove_all(dir_.Join(made));
    }
    Node(inv.driver_version, minors, caps, mig_minors);
  }

  TempDir dir_;
};

std::string Error(const absl::StatusOr<std::shared_ptr<const Generation>>& g) {
  return g.ok() ? "<ok>" : std::string(g.status().message());
}

// Answers each claim the test puts: one result, this node's device `name`.
class OneDeviceClaims : public dra::ClaimReader {
 public:
  absl::StatusOr<Answer> GetClaim(const std::string&, const std::string& name) override {
    return Answer{200, StrCat(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",)",
                              R"("metadata":{"name":")", name, R"(","namespace":"ns","uid":"u-)",
                              name, R"("},"spec":{"devices":{"requests":[{"name":"gpu",)",
                              R"("exactly":{"deviceClassName":"gpu.gpu-agent.github.io"}}]}},)",
                              R"("status":{"allocation":{"devices":{"results":[{"request":"gpu",)",
                              R"("driver":"gpu.gpu-agent.github.io","pool":"node-a","device":")",
                              name, R"("}]}}}})")};
  }
};

// Prepares one claim per DRA device through the real preparer; returns how
// many prepared.
size_t PrepareEveryDevice(const Generation& gen, const std::string& dir) {
  auto catalog = std::make_shared<dra::DeviceCatalog>();
  catalog->devices = DraDevicesOf(gen.model, gen.inventory);
  EXPECT_TRUE(gen.cdi.has_value()) << "DRA mode with a spec folder: a spec";
  if (gen.cdi) catalog->node_spec = gen.cdi->spec;
  dra::PreparerOptions o;
  o.driver = "gpu.gpu-agent.github.io";
  o.pool = "node-a";
  o.cdi_dir = dir + "/claims";
  o.cdi_vendor = "gpu-agent.github.io";
  o.checkpoint = dir + "/checkpoint.json";
  auto preparer = dra::ClaimPreparer::Create(o, std::make_shared<OneDeviceClaims>());
  EXPECT_TRUE(preparer.ok()) << preparer.status();
  if (!preparer.ok()) return 0;
  (*preparer)->SetCatalog(catalog);
  size_t prepared = 0;
  for (const DraDevice& d : catalog->devices) {
    const std::string uid = StrCat("u-", d.name);
    dra::PrepareOutcome outcome = (*preparer)->Prepare({{"ns", uid, d.name}})[uid];
    EXPECT_EQ(outcome.error, "") << d.name;
    if (outcome.error.empty()) ++prepared;
  }
  return prepared;
}

std::vector<std::string> NvmlFixtures() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(testing::FixturePath(""))) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().filename());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(ProjectionTest, EveryFixturesDevicesPrepareAllocateAndCountAlike) {
  const std::vector<std::string> fixtures = NvmlFixtures();
  ASSERT_GE(fixtures.size(), 5u);
  size_t mig_units = 0, prepared = 0;
  for (const std::string& name : fixtures) {
    fake_nvml::Fixture fixture;
    std::string error;
    ASSERT_TRUE(fake_nvml::LoadFixture(testing::FixturePath(name), &fixture, &error)) << error;
    absl::StatusOr<nvml::Inventory> inv = Discover(fixture);
    ASSERT_TRUE(inv.ok()) << name << ": " << inv.status();
    NodeOf(*inv);
    for (const char* mig : {"none", "mixed"}) {
      SCOPED_TRACE(StrCat(name, " migStrategy=", mig));
      auto plugin = Build(Base("plugin", mig), *inv);
      ASSERT_TRUE(plugin.ok()) << Error(plugin);
      auto stat = Build(Base("static", mig), *inv);
      ASSERT_TRUE(stat.ok()) << Error(stat);
      auto dra = Build(Base("dra", mig), *inv);
      ASSERT_TRUE(dra.ok()) << Error(dra);
      // One model: the three modes expand the same units.
      ASSERT_EQ((*plugin)->model.units.size(), (*dra)->model.units.size());
      ASSERT_EQ((*stat)->model.units.size(), (*dra)->model.units.size());
      for (const DeviceUnit& u : (*dra)->model.units) mig_units += u.is_mig();
      // Plugin mode: every ID has its CDI name. Static mode: the same counts.
      const testing::AllocatedIds served = testing::AllocateEachId(**plugin);
      EXPECT_EQ(served.ids_checked, (*dra)->model.units.size());
      std::map<std::string, size_t> counted;
      for (const auto& r : (*stat)->plan.resources) counted[r.resource_name] = r.devices.size();
      EXPECT_EQ(counted, served.devices);
      // DRA mode: no device-plugin resources, and every device prepares.
      EXPECT_TRUE((*dra)->plan.resources.empty());
      const size_t n = PrepareEveryDevice(**dra, dir_.Join(StrCat("dra-", name, "-", mig)));
      EXPECT_EQ(n, (*dra)->model.units.size());
      prepared += n;
    }
  }
  EXPECT_GT(mig_units, 0u) << "a fixture with MIG devices";
  EXPECT_GT(prepared, 0u);
}

// A GPU that cannot be served (no device minor: no /dev/nvidia<minor> to
// give) is in no projection, and is named once.
TEST_F(ProjectionTest, AGpuWithoutMinorIsInNoProjectionAndNamedOnce) {
  Node(kDriver, {0, 1}, {}, "");
  nvml::Inventory inv = testing::PlainNode(2);
  inv.driver_version = kDriver;
  inv.links.assign(2, std::vector<nvml::GpuLink>(2));
  inv.gpus[1].minor = -1;
  inv.gpus[1].error = "nvmlDeviceGetMinorNumber: Unknown Error";
  for (const char* mode : {"plugin", "static", "dra"}) {
    SCOPED_TRACE(mode);
    auto gen = Build(Base(mode, "none"), inv);
    ASSERT_TRUE(gen.ok()) << Error(gen);
    const Generation& g = **gen;
    EXPECT_EQ(g.model.gpu_uuids, std::vector<std::string>{"GPU-0aaa"});
    for (const auto& r : g.plan.resources) EXPECT_EQ(r.devices.size(), 1u) << r.resource_name;
    if (g.cdi) {
      for (const cdi::Device& d : g.cdi->spec.devices) EXPECT_NE(d.name, "GPU-1aaa");
    }
    EXPECT_EQ(DraDevicesOf(g.model, g.inventory).size(), 1u);
    size_t said = 0;
    for (const std::string& w : g.warnings) said += w.find("GPU-1aaa") != std::string::npos;
    EXPECT_EQ(said, 1u) << StrJoin(g.warnings, "\n");
    EXPECT_THAT(StrJoin(g.warnings, "\n"),
                HasSubstr("GPU 1 (GPU-1aaa) has no device minor and is not advertised: "
                          "nvmlDeviceGetMinorNumber: Unknown Error"));
  }
}

// The same on a node the stand-in serves: a fixture GPU whose minor NVML
// does not give is in no projection (the plan, static mode's count, the CDI
// spec, DRA's devices, the labels' count), and one warning names it.
TEST_F(ProjectionTest, AFixtureGpuWithoutMinorIsInNoProjection) {
  fake_nvml::Fixture fixture;
  std::string error;
  ASSERT_TRUE(fake_nvml::LoadFixture(testing::FixturePath("8-gpu-pcie.yaml"), &fixture, &error))
      << error;
  fixture.gpus[3].failures["nvmlDeviceGetMinorNumber"] = 999;  // NVML_ERROR_UNKNOWN
  absl::StatusOr<nvml::Inventory> inv = Discover(fixture);
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->gpus.size(), 8u);
  ASSERT_EQ(inv->gpus[3].minor, -1);
  const std::string uuid = inv->gpus[3].uuid;
  const std::string dra_name = dra::GpuDeviceName(inv->gpus[3]);
  NodeOf(*inv);
  for (const char* mode : {"plugin", "static", "dra"}) {
    SCOPED_TRACE(mode);
    auto gen = Build(Base(mode, "none"), *inv);
    ASSERT_TRUE(gen.ok()) << Error(gen);
    const Generation& g = **gen;
    EXPECT_EQ(g.model.units.size(), 7u);
    for (const DeviceUnit& u : g.model.units) EXPECT_NE(u.uuid, uuid);
    if (std::string(mode) != "dra") {
      ASSERT_EQ(g.plan.resources.size(), 1u);
      EXPECT_EQ(g.plan.resources[0].devices.size(), 7u);
      for (const auto& d : g.plan.resources[0].devices) EXPECT_NE(d.gpu_id, uuid);
    }
    EXPECT_EQ(g.cdi.has_value(), std::string(mode) != "static");
    if (g.cdi) {
      for (const cdi::Device& d : g.cdi->spec.devices) EXPECT_NE(d.name, uuid);
    }
    const std::vector<DraDevice> devices = DraDevicesOf(g.model, g.inventory);
    EXPECT_EQ(devices.size(), 7u);
    for (const DraDevice& d : devices) EXPECT_NE(d.name, dra_name);
    EXPECT_EQ(g.labels.labels.at("nvidia.com/gpu.count"), "7");
    size_t said = 0;
    for (const std::string& w : g.warnings) said += w.find(uuid) != std::string::npos;
    EXPECT_EQ(said, 1u) << StrJoin(g.warnings, "\n");
    EXPECT_THAT(StrJoin(g.warnings, "\n"),
                HasSubstr(StrCat("GPU 3 (", uuid, ") has no device minor and is not advertised")));
  }
}

// A GPU lost at discovery (NVML gave its UUID, then GPU_IS_LOST) stays, out,
// so that a reset brings it back as it does a GPU lost later; with no minor
// it has no device node and no CDI entry, so DRA publishes no device for it.
TEST_F(ProjectionTest, AGpuLostAtDiscoveryWithoutMinorIsKeptUnhealthy) {
  Node(kDriver, {0, 1}, {}, "");
  nvml::Inventory inv = testing::PlainNode(2);
  inv.driver_version = kDriver;
  inv.links.assign(2, std::vector<nvml::GpuLink>(2));
  inv.gpus[1].minor = -1;
  inv.gpus[1].lost = true;
  inv.gpus[1].error = "nvmlDeviceGetMinorNumber: GPU is lost";
  auto gen = Build(Base("plugin", "none"), inv);
  ASSERT_TRUE(gen.ok()) << Error(gen);
  const Generation& g = **gen;
  EXPECT_EQ(g.model.gpu_uuids, (std::vector<std::string>{"GPU-0aaa", "GPU-1aaa"}));
  EXPECT_EQ(g.model.initially_unhealthy, std::set<std::string>{"GPU-1aaa"});
  ASSERT_EQ(g.plan.resources.size(), 1u);
  ASSERT_EQ(g.plan.resources[0].devices.size(), 2u);
  EXPECT_FALSE(g.plan.resources[0].devices[1].healthy);
  EXPECT_TRUE(g.plan.resources[0].devices[1].device_nodes.empty());
  for (const cdi::Device& d : g.cdi->spec.devices) EXPECT_NE(d.name, "GPU-1aaa");
  EXPECT_THAT(StrJoin(g.warnings, "\n"),
              HasSubstr("GPU 1 (GPU-1aaa) is lost and NVML gives no device minor"));
  // DRA mode publishes only devices that prepare: none for it.
  auto dra = Build(Base("dra", "none"), inv);
  ASSERT_TRUE(dra.ok()) << Error(dra);
  EXPECT_EQ((*dra)->model.gpu_uuids, (std::vector<std::string>{"GPU-0aaa", "GPU-1aaa"}));
  const std::vector<DraDevice> devices = DraDevicesOf((*dra)->model, (*dra)->inventory);
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].uuid, "GPU-0aaa");
  EXPECT_EQ(PrepareEveryDevice(**dra, dir_.Join("dra")), 1u);
}

// migStrategy single's rule (every GPU in MIG mode, one profile) is the
// device plugin's: DRA mode publishes a node that mixes MIG and whole GPUs.
TEST_F(ProjectionTest, DraModeHasNoDevicePluginRule) {
  Node(kDriver, {0, 1}, {12, 13, 21, 22, 30, 31},
       "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
       "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
       "gpu0/gi3/ci0/access 31\n");
  nvml::Inventory inv = testing::MixedNode();
  inv.driver_version = kDriver;
  auto plugin = Build(Base("plugin", "single"), inv);
  EXPECT_THAT(Error(plugin), HasSubstr("flags.migStrategy single needs every GPU in MIG mode"));
  auto dra = Build(Base("dra", "single"), inv);
  ASSERT_TRUE(dra.ok()) << Error(dra);
  std::vector<std::string> names;
  for (const DraDevice& d : DraDevicesOf((*dra)->model, (*dra)->inventory)) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-0aaa-mig-2g-20gb-1-0", "gpu-0aaa-mig-1g-10gb-2-0",
                                             "gpu-0aaa-mig-1g-10gb-3-0", "gpu-1aaa"}));
  EXPECT_EQ(PrepareEveryDevice(**dra, dir_.Join("dra")), 4u);
}

// A MIG device whose capability nodes are unknown (no mig-minors file) is
// still a unit; the projections that need its nodes fail naming it and the
// file, those that do not go on.
TEST_F(ProjectionTest, UnknownCapabilityNodesFailOnlyWhatNeedsThem) {
  Node(kDriver, {0, 1}, {}, "");
  std::filesystem::remove(dir_.Join("proc/driver/nvidia-caps/mig-minors"));
  nvml::Inventory inv = testing::MixedNode();
  inv.driver_version = kDriver;
  Config plain = Base("plugin", "mixed");
  plain.flags.plugin.device_list_strategy = {"envvar"};
  plain.flags.plugin.pass_device_specs = false;
  EXPECT_TRUE(Build(plain, inv).ok());
  EXPECT_TRUE(Build(Base("static", "mixed"), inv).ok());
  plain.flags.plugin.pass_device_specs = true;
  EXPECT_THAT(Error(Build(plain, inv)),
              HasSubstr("cannot pass device specs (flags.plugin.passDeviceSpecs): MIG device 0:0 "
                        "(MIG-a) needs its capability device nodes, listed in mig-minors"));
  EXPECT_THAT(Error(Build(Base("dra", "mixed"), inv)),
              HasSubstr("cannot generate the CDI spec: MIG device 0:0 (MIG-a) needs its "
                        "capability device nodes"));
}

}  // namespace
}  // namespace gpu_agent
