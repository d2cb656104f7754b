// Inventory discovery (src/nvml/inventory.cc) against the in-process NVML
// fake: the fixtures the stand-in reads, served through the same function
// table, with neither dlopen nor the stand-in library.
#include "nvml/inventory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "fixture.h"
#include "in_process_nvml.h"
#include "nvml/gpu_fabric.h"
#include "nvml/mig_profile.h"
#include "nvml/nvml_library.h"
#include "support/test_support.h"

namespace gpu_agent::nvml {
namespace {

using gpu_agent::testing::FixturePath;
using gpu_agent::testing::ReadFile;
using gpu_agent::testing::TempDir;

fake_nvml::Fixture LoadFixture(const std::string& path) {
  fake_nvml::Fixture fixture;
  std::string error;
  EXPECT_TRUE(fake_nvml::LoadFixture(path, &fixture, &error)) << error;
  return fixture;
}

// The fixture at `path` as an in-process NVML, and a library over it.
struct Nvml {
  explicit Nvml(const std::string& path) : fake(LoadFixture(path)), lib(fake.Library()) {}
  fake_nvml::InProcessNvml fake;
  std::unique_ptr<NvmlLibrary> lib;
};

// The sysfs numa_node file of each GPU the fixture places on a NUMA node.
void WriteNumaNodes(const std::string& fixture, const std::string& root) {
  for (const fake_nvml::GpuFixture& g : LoadFixture(fixture).gpus) {
    if (g.numa_node < 0) continue;
    const std::string dir = root + "/bus/pci/devices/" + SysfsPciAddress(g.pci_bus_id);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/numa_node") << g.numa_node << "\n";
  }
}

// NVML_NVLINK_MAX_LINKS grew with each generation: links past the value in
// the agent's header are still found, and probing stops where NVML says
// there is no such link.
TEST(InventoryTest, NvLinksPastTheHeadersLimitAreCounted) {
  TempDir dir;
  const std::string fixture = dir.Write("wide.yaml", R"(nvlinkSlots: 24
gpus:
  - uuid: GPU-00000000-0000-0000-0000-000000000001
    name: Future GPU
    memoryMiB: 196608
    minor: 0
    pciBusId: "00000000:18:00.0"
  - uuid: GPU-00000000-0000-0000-0000-000000000002
    name: Future GPU
    memoryMiB: 196608
    minor: 1
    pciBusId: "00000000:2A:00.0"
nvlinks:
  - gpus: [0, 1]
    links: 22
)");
  Nvml node(fixture);
  auto& lib = node.lib;
  ASSERT_TRUE(lib && lib->Init().ok());
  auto inv = DiscoverInventory(*lib, "/nonexistent");
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->links[0][1].nvlinks, 22);
  EXPECT_EQ(inv->gpus[1].pci_bus_id, "00000000:2A:00.0");
}

TEST(InventoryTest, ReadsEveryFieldOfTheDgxFixture) {
  TempDir sysfs;
  WriteNumaNodes(FixturePath("8-gpu-nvlink.yaml"), sysfs.path());
  Nvml node(FixturePath("8-gpu-nvlink.yaml"));
  auto& lib = node.lib;
  ASSERT_TRUE(lib);
  ASSERT_TRUE(lib->Init().ok());
  auto inv = DiscoverInventory(*lib, sysfs.path());
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->driver_version, "550.54.15");
  EXPECT_EQ(inv->cuda_driver_version, "12.4");
  ASSERT_EQ(inv->gpus.size(), 8u);
  const GpuRecord& g5 = inv->gpus[5];
  EXPECT_EQ(g5.index, 5u);
  EXPECT_EQ(g5.name, "Tesla V100-SXM2-32GB");
  EXPECT_EQ(g5.memory_mib, 32768u);
  EXPECT_EQ(g5.minor, 5);
  EXPECT_EQ(g5.pci_bus_id, "00000000:86:00.0");
  EXPECT_EQ(g5.numa_node, 1);
  EXPECT_EQ(g5.cc_major, 7);
  EXPECT_EQ(g5.architecture, "volta");
  EXPECT_TRUE(g5.error.empty()) << g5.error;
  EXPECT_EQ(g5.uuid.rfind("GPU-", 0), 0u);
  // Hybrid cube-mesh: 0-3 double link, 0-1 single, 0-5 none (across sockets).
  EXPECT_EQ(inv->links[0][3].nvlinks, 2);
  EXPECT_EQ(inv->links[3][0].nvlinks, 2);
  EXPECT_EQ(inv->links[0][1].nvlinks, 1);
  EXPECT_EQ(inv->links[0][5].nvlinks, 0);
  EXPECT_EQ(inv->links[0][5].pcie_level, 50);
  EXPECT_EQ(inv->links[0][1].pcie_level, 10);  // same PCIe switch
  int total = 0;
  for (size_t j = 0; j < 8; ++j) total += inv->links[2][j].nvlinks;
  EXPECT_EQ(total, 6);  // six NVLinks per V100
}

TEST(InventoryTest, PcieTopologyLevels) {
  Nvml node(FixturePath("8-gpu-pcie.yaml"));
  auto& lib = node.lib;
  ASSERT_TRUE(lib && lib->Init().ok());
  auto inv = DiscoverInventory(*lib, "/nonexistent");
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->links[0][1].pcie_level, 10);  // same switch
  EXPECT_EQ(inv->links[0][2].pcie_level, 30);  // same host bridge
  EXPECT_EQ(inv->links[0][4].pcie_level, 50);  // other socket
  EXPECT_EQ(inv->links[0][1].nvlinks, 0);
  EXPECT_EQ(inv->gpus[0].numa_node, -1);  // no sysfs: unknown, not a guess
}

TEST(InventoryTest, MigInstances) {
  Nvml node(FixturePath("2-gpu-mig.yaml"));
  auto& lib = node.lib;
  ASSERT_TRUE(lib && lib->Init().ok());
  auto inv = DiscoverInventory(*lib, "/nonexistent");
  ASSERT_TRUE(inv.ok());
  ASSERT_TRUE(inv->gpus[0].mig_enabled);
  ASSERT_EQ(inv->gpus[0].mig_devices.size(), 3u);
  EXPECT_EQ(inv->gpus[0].mig_devices[0].gpu_instance_slices, 2u);
  EXPECT_EQ(inv->gpus[0].mig_devices[0].memory_mib, 19968u);
  EXPECT_EQ(inv->gpus[0].mig_devices[2].gpu_instance_id, 3u);
  EXPECT_EQ(inv->gpus[0].mig_devices[1].uuid.rfind("MIG-", 0), 0u);
  EXPECT_FALSE(inv->gpus[1].mig_enabled);
}

// In a container without privilege NVML refuses the memory of a
// MIG-enabled GPU; its MIG devices are named all the same, from the GPU's
// instance profiles: with NVML's names (R510+) and, where the driver has
// only the unversioned call, from the profiles' memory sizes.
TEST(InventoryTest, MigProfilesAreNamedWithoutPrivilege) {
  TempDir dir;
  const std::string mig = ReadFile(FixturePath("2-gpu-mig.yaml"));
  const std::string gpu0 = "  - uuid: GPU-ed474d47-acdb-5d33-bc5a-38d1d781b523\n";
  std::string old_driver = mig;
  ASSERT_NE(old_driver.find(gpu0), std::string::npos);
  old_driver.replace(old_driver.find(gpu0), gpu0.size(),
                     gpu0 + "    fail:\n      nvmlDeviceGetGpuInstanceProfileInfoV: 13\n");
  for (const bool names : {true, false}) {
    Nvml node(
        dir.Write(names ? "a.yaml" : "b.yaml", "privileged: false\n" + (names ? mig : old_driver)));
    auto& lib = node.lib;
    ASSERT_TRUE(lib && lib->Init().ok());
    auto inv = DiscoverInventory(*lib, "/nonexistent");
    ASSERT_TRUE(inv.ok()) << inv.status();
    const GpuRecord& g = inv->gpus[0];
    EXPECT_EQ(g.memory_mib, 0u);
    EXPECT_NE(g.error.find("nvmlDeviceGetMemoryInfo: Insufficient Permissions (4)"),
              std::string::npos)
        << g.error;
    EXPECT_FALSE(g.lost);
    ASSERT_EQ(g.mig_profiles.size(), 7u);
    EXPECT_EQ(g.mig_profiles[0].name, names ? "MIG 1g.10gb" : "");
    EXPECT_EQ(g.mig_profiles[0].id, 19u);
    EXPECT_EQ(g.mig_profiles[1].slices, 2u);  // profile index 1: 2g.20gb
    ASSERT_EQ(g.mig_devices.size(), 3u);
    EXPECT_EQ(g.mig_devices[0].decoders, 1u);
    std::vector<std::string> got;
    for (const MigRecord& m : g.mig_devices) got.push_back(MigProfileName(g, m));
    EXPECT_EQ(got, (std::vector<std::string>{"2g.20gb", "1g.10gb", "1g.10gb"})) << names;
    EXPECT_EQ(inv->gpus[1].memory_mib, 81920u);  // MIG off: open to all
    EXPECT_TRUE(inv->gpus[1].mig_profiles.empty());
  }
}

// A failed MIG-mode query is not "MIG off": the error is kept for the
// planner. NOT_SUPPORTED (pre-Ampere) is MIG off; GPU_IS_LOST is a lost GPU.
TEST(InventoryTest, FailedMigModeQueryIsKeptApartFromMigOff) {
  TempDir dir;
  Nvml node(dir.Write("f.yaml", R"(
gpus:
  - uuid: GPU-aaaa
    pciBusId: "00000000:01:00.0"
    fail:
      nvmlDeviceGetMigMode: 999
  - uuid: GPU-bbbb
    pciBusId: "00000000:02:00.0"
    computeCapability: "7.0"
  - uuid: GPU-cccc
    pciBusId: "00000000:03:00.0"
    fail:
      nvmlDeviceGetMigMode: 15
)"));
  auto& lib = node.lib;
  ASSERT_TRUE(lib && lib->Init().ok());
  auto inv = DiscoverInventory(*lib, "/nonexistent");
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->gpus[0].mig_mode_error, "nvmlDeviceGetMigMode: Unknown Error (999)");
  EXPECT_FALSE(inv->gpus[0].mig_enabled);
  EXPECT_FALSE(inv->gpus[0].lost);
  EXPECT_EQ(inv->gpus[1].mig_mode_error, "");
  EXPECT_EQ(inv->gpus[1].error, "");
  EXPECT_EQ(inv->gpus[2].mig_mode_error, "");
  EXPECT_TRUE(inv->gpus[2].lost);
}

TEST(InventoryTest, FailingQueryListsTheGpuWithTheError) {
  TempDir dir;
  const std::string fixture = dir.Write("f.yaml", R"(
gpus:
  - uuid: GPU-aaaa
    pciBusId: "00000000:01:00.0"
  - uuid: GPU-bbbb
    pciBusId: "00000000:02:00.0"
    fail:
      nvmlDeviceGetMemoryInfo: 999
  - uuid: GPU-cccc
    pciBusId: "00000000:03:00.0"
    lost: true
)");
  Nvml node(fixture);
  auto& lib = node.lib;
  ASSERT_TRUE(lib && lib->Init().ok());
  auto inv = DiscoverInventory(*lib, "/nonexistent");
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->gpus.size(), 3u);
  EXPECT_TRUE(inv->gpus[0].error.empty());
  EXPECT_EQ(inv->gpus[1].uuid, "GPU-bbbb");
  EXPECT_NE(inv->gpus[1].error.find("nvmlDeviceGetMemoryInfo: Unknown Error (999)"),
            std::string::npos)
      << inv->gpus[1].error;
  EXPECT_NE(inv->gpus[2].error.find("GPU is lost (15)"), std::string::npos) << inv->gpus[2].error;
}

TEST(InventoryTest, InitFailureKeepsNvmlsReason) {
  TempDir dir;
  Nvml node(dir.Write("f.yaml", "initError: 9\ngpus: []\n"));
  auto& lib = node.lib;
  ASSERT_TRUE(lib);
  absl::Status s = lib->Init();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("Driver Not Loaded (9)"), std::string::npos) << s;
}

TEST(InventoryTest, SysfsAddressForm) {
  EXPECT_EQ(SysfsPciAddress("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(SysfsPciAddress("0000:3b:00.0"), "0000:3b:00.0");
  // Domains above 0xFFFF (VMD, some hypervisors) keep every digit.
  EXPECT_EQ(SysfsPciAddress("00010000:3B:00.0"), "10000:3b:00.0");
  EXPECT_EQ(SysfsPciAddress("1234ABCD:01:00.0"), "1234abcd:01:00.0");
}

// The PCI class and DMI product name gpu-feature-discovery's mode and
// machine labels come from; anything malformed reads as unknown, never a
// crash.
TEST(InventoryTest, PciClassAndMachineFromSysfs) {
  TempDir root;
  const std::string dev = "bus/pci/devices/0000:3b:00.0/";
  root.Write(dev + "class", "0x030200\n");
  EXPECT_EQ(ReadPciClass(root.path(), "00000000:3B:00.0"), 0x030200u);
  EXPECT_EQ(ReadPciClass(root.path(), "00000000:3C:00.0"), 0u);  // no such device
  for (const char* bad : {"", "030200", "0x", "0xZZ", "0x0302000000"}) {
    root.Write(dev + "class", bad);
    EXPECT_EQ(ReadPciClass(root.path(), "00000000:3B:00.0"), 0u) << bad;
  }
  EXPECT_EQ(ReadMachineProduct(root.path()), "");
  root.Write("devices/virtual/dmi/id/product_name", "  ProLiant DL380 Gen10 \n");
  EXPECT_EQ(ReadMachineProduct(root.path()), "ProLiant DL380 Gen10");
}

TEST(InventoryTest, FabricInfoLayoutAndUuidText) {
  // NVML_STRUCT_VERSION(GpuFabricInfo, 2), as nvml.h spells it.
  EXPECT_EQ(nvmlGpuFabricInfo_v2, 0x02000024u);
  const unsigned char bytes[NVML_GPU_FABRIC_UUID_LEN] = {0x5b, 0x6c, 0x2a, 0x3e, 0x0f, 0x1d,
                                                         0x4c, 0x2b, 0x9a, 0x8e, 0x7d, 0x6c,
                                                         0x5b, 0x4a, 0x3f, 0x21};
  EXPECT_EQ(FormatFabricUuid(bytes), "5b6c2a3e-0f1d-4c2b-9a8e-7d6c5b4a3f21");
}

}  // namespace
}  // namespace gpu_agent::nvml
