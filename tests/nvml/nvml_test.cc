// NVML through the real dlopen path, against the libnvidia-ml stand-in.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "nvml/inventory.h"
#include "nvml/mig_profile.h"
#include "nvml/nvml_api.h"
#include "nvml/nvml_library.h"
#include "support/test_support.h"

namespace gpu_agent::nvml {
namespace {

using gpu_agent::testing::FakeNvmlDir;
using gpu_agent::testing::FixturePath;
using gpu_agent::testing::ReadFile;
using gpu_agent::testing::TempDir;
using gpu_agent::testing::WriteFifo;

// A driver root whose usr/lib64 holds the stand-in, as a driver install would.
class DriverRoot {
 public:
  DriverRoot() {
    std::filesystem::create_directories(dir_.Join("usr/lib64"));
    std::filesystem::create_symlink(FakeNvmlDir() + "/libnvidia-ml.so.1",
                                    dir_.Join("usr/lib64/libnvidia-ml.so.1"));
  }
  std::string path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

std::unique_ptr<NvmlLibrary> OpenWithFixture(const DriverRoot& root, const std::string& fixture) {
  ::setenv("FAKE_NVML_FIXTURE", fixture.c_str(), 1);
  auto lib = NvmlLibrary::Open(root.path());
  EXPECT_TRUE(lib.ok()) << lib.status();
  if (!lib.ok()) return nullptr;
  EXPECT_EQ((*lib)->path(), root.path() + "/usr/lib64/libnvidia-ml.so.1");
  return *std::move(lib);
}

TEST(NvmlLibraryTest, MissingLibrarySaysWhereItLookedAndWhatToDo) {
  TempDir empty;
  auto lib = NvmlLibrary::Open(empty.path());
  ASSERT_FALSE(lib.ok());
  const std::string msg(lib.status().message());
  // kNotFound: what waiting for a driver container mends (driver.waitTimeout).
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(msg.find(empty.path() + "/usr/lib64/libnvidia-ml.so.1"), std::string::npos) << msg;
  EXPECT_NE(msg.find(empty.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
            std::string::npos);
  EXPECT_NE(msg.find("NVIDIA_DRIVER_ROOT"), std::string::npos) << msg;
}

TEST(NvmlLibraryTest, NotAnElfFileIsReportedWithTheLoaderReason) {
  TempDir root;
  root.Write("usr/lib64/libnvidia-ml.so.1", "this is not a shared library");
  auto lib = NvmlLibrary::Open(root.path());
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(std::string(lib.status().message()).find("usr/lib64/libnvidia-ml.so.1 ("),
            std::string::npos)
      << lib.status();
}

// Offsets and sizes from NVIDIA's nvml.h, written here as numbers: the
// stand-in is built from the agent's own header, so only literals catch a
// layout both got wrong.
TEST(NvmlAbiTest, StructLayoutsAreNvidias) {
  EXPECT_EQ(sizeof(nvmlPciInfo_t), 68u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, busIdLegacy), 0u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, domain), 16u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, bus), 20u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, device), 24u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, pciDeviceId), 28u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, pciSubSystemId), 32u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, busId), 36u);
  EXPECT_EQ(sizeof(nvmlMemory_t), 24u);
  EXPECT_EQ(offsetof(nvmlMemory_t, used), 16u);
  EXPECT_EQ(sizeof(nvmlDeviceAttributes_t), 40u);
  EXPECT_EQ(offsetof(nvmlDeviceAttributes_t, gpuInstanceSliceCount), 24u);
  EXPECT_EQ(offsetof(nvmlDeviceAttributes_t, memorySizeMB), 32u);
  EXPECT_EQ(sizeof(nvmlEventData_t), 32u);
  EXPECT_EQ(offsetof(nvmlEventData_t, eventType), 8u);
  EXPECT_EQ(offsetof(nvmlEventData_t, eventData), 16u);
  EXPECT_EQ(offsetof(nvmlEventData_t, gpuInstanceId), 24u);
  EXPECT_EQ(offsetof(nvmlEventData_t, computeInstanceId), 28u);
  // nvml.h: nvmlGpuInstanceProfileInfo_t, and _v2_t with version and name.
  EXPECT_EQ(sizeof(nvmlGpuInstanceProfileInfo_t), 48u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_t, sliceCount), 8u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB), 40u);
  EXPECT_EQ(sizeof(nvmlGpuInstanceProfileInfo_v2_t), 152u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v2_t, id), 4u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB), 48u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v2_t, name), 56u);
  EXPECT_EQ(static_cast<unsigned>(nvmlGpuInstanceProfileInfo_v2), 0x02000098u);
  // Return codes NVIDIA numbers so (22 was once misnamed here).
  EXPECT_EQ(NVML_ERROR_GPU_IS_LOST, 15);
  EXPECT_EQ(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, 22);
  EXPECT_EQ(NVML_ERROR_INVALID_STATE, 29);
  EXPECT_EQ(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, 30);
  EXPECT_EQ(NVML_ERROR_UNKNOWN, 999);
}

// A driver older than R450 (R396-R440: versioned PCI functions, but no
// nvmlEventSetWait_v2) is refused, naming what is missing and the oldest
// branch, rather than run with health checks silently off.
TEST(NvmlLibraryTest, DriverOlderThanR450IsRefusedByName) {
  TempDir root;
  std::filesystem::create_directories(root.Join("usr/lib64"));
  std::filesystem::create_symlink(GPU_AGENT_LEGACY_NVML, root.Join("usr/lib64/libnvidia-ml.so.1"));
  auto lib = NvmlLibrary::Open(root.path());
  ASSERT_FALSE(lib.ok());
  const std::string msg(lib.status().message());
  EXPECT_NE(msg.find("nvmlEventSetWait_v2"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("nvmlDeviceGetPciInfo_v3"), std::string::npos) << "it has it: " << msg;
  EXPECT_NE(msg.find("R450 or newer"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("nvmlSystemGetNVMLVersion"), std::string::npos) << "optional: " << msg;
  EXPECT_EQ(msg.find("nvmlDeviceGetIndex"), std::string::npos) << "optional: " << msg;
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
  DriverRoot root;
  auto lib = OpenWithFixture(root, fixture);
  ASSERT_TRUE(lib && lib->Init().ok());
  auto inv = DiscoverInventory(*lib, "/nonexistent");
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->links[0][1].nvlinks, 22);
  EXPECT_EQ(inv->gpus[1].pci_bus_id, "00000000:2A:00.0");
}

TEST(InventoryTest, ReadsEveryFieldOfTheDgxFixture) {
  DriverRoot root;
  TempDir sysfs;
  ASSERT_TRUE(
      gpu_agent::testing::WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), sysfs.path()));
  auto lib = OpenWithFixture(root, FixturePath("8-gpu-nvlink.yaml"));
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
  DriverRoot root;
  auto lib = OpenWithFixture(root, FixturePath("8-gpu-pcie.yaml"));
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
  DriverRoot root;
  auto lib = OpenWithFixture(root, FixturePath("2-gpu-mig.yaml"));
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
  DriverRoot root;
  TempDir dir;
  const std::string mig = ReadFile(FixturePath("2-gpu-mig.yaml"));
  const std::string gpu0 = "  - uuid: GPU-ed474d47-acdb-5d33-bc5a-38d1d781b523\n";
  std::string old_driver = mig;
  ASSERT_NE(old_driver.find(gpu0), std::string::npos);
  old_driver.replace(old_driver.find(gpu0), gpu0.size(),
                     gpu0 + "    fail:\n      nvmlDeviceGetGpuInstanceProfileInfoV: 13\n");
  for (const bool names : {true, false}) {
    auto lib = OpenWithFixture(root, dir.Write(names ? "a.yaml" : "b.yaml",
                                               "privileged: false\n" + (names ? mig : old_driver)));
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
  DriverRoot root;
  TempDir dir;
  auto lib = OpenWithFixture(root, dir.Write("f.yaml", R"(
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
  DriverRoot root;
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
  auto lib = OpenWithFixture(root, fixture);
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
  DriverRoot root;
  TempDir dir;
  auto lib = OpenWithFixture(root, dir.Write("f.yaml", "initError: 9\ngpus: []\n"));
  ASSERT_TRUE(lib);
  absl::Status s = lib->Init();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("Driver Not Loaded (9)"), std::string::npos) << s;
}

TEST(InventoryTest, MalformedFixtureFailsInitNotTheProcess) {
  DriverRoot root;
  TempDir dir;
  auto lib = OpenWithFixture(root, dir.Write("f.yaml", "gpus:\n  - uuid: nope\n"));
  ASSERT_TRUE(lib);
  absl::Status s = lib->Init();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("Unknown Error"), std::string::npos) << s;
}

// Clients bind NVML lazily, so a missing export kills them at call time: the
// stand-in must export every entry point a typical client uses.
TEST(FakeNvmlTest, ExportsTheCommonNvmlSymbols) {
  void* h = ::dlopen((FakeNvmlDir() + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  for (const char* sym : {"nvmlInit",
                          "nvmlInit_v2",
                          "nvmlInitWithFlags",
                          "nvmlShutdown",
                          "nvmlErrorString",
                          "nvmlSystemGetDriverVersion",
                          "nvmlSystemGetNVMLVersion",
                          "nvmlSystemGetCudaDriverVersion",
                          "nvmlSystemGetCudaDriverVersion_v2",
                          "nvmlDeviceGetCount",
                          "nvmlDeviceGetCount_v2",
                          "nvmlDeviceGetHandleByIndex",
                          "nvmlDeviceGetHandleByIndex_v2",
                          "nvmlDeviceGetHandleByUUID",
                          "nvmlDeviceGetHandleByPciBusId_v2",
                          "nvmlDeviceGetIndex",
                          "nvmlDeviceGetName",
                          "nvmlDeviceGetUUID",
                          "nvmlDeviceGetMinorNumber",
                          "nvmlDeviceGetPciInfo",
                          "nvmlDeviceGetPciInfo_v2",
                          "nvmlDeviceGetPciInfo_v3",
                          "nvmlDeviceGetMemoryInfo",
                          "nvmlDeviceGetBrand",
                          "nvmlDeviceGetArchitecture",
                          "nvmlDeviceGetCudaComputeCapability",
                          "nvmlDeviceGetTopologyCommonAncestor",
                          "nvmlDeviceGetNvLinkState",
                          "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                          "nvmlDeviceGetMigMode",
                          "nvmlDeviceGetMaxMigDeviceCount",
                          "nvmlDeviceGetMigDeviceHandleByIndex",
                          "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
                          "nvmlDeviceIsMigDeviceHandle",
                          "nvmlDeviceGetGpuInstanceId",
                          "nvmlDeviceGetComputeInstanceId",
                          "nvmlDeviceGetAttributes_v2",
                          "nvmlDeviceGetGpuInstanceProfileInfo",
                          "nvmlDeviceGetGpuInstanceProfileInfoV",
                          "nvmlDeviceGetSupportedEventTypes",
                          "nvmlDeviceRegisterEvents",
                          "nvmlEventSetCreate",
                          "nvmlEventSetWait",
                          "nvmlEventSetWait_v2",
                          "nvmlEventSetFree"}) {
    EXPECT_NE(::dlsym(h, sym), nullptr) << sym;
  }
}

// A client written against NVIDIA's documented API, not the agent's
// inventory code, enumerates the stand-in: PCI struct layout, handles by bus
// id, MIG parent handles, and the v1 event struct size.
TEST(FakeNvmlTest, AnotherClientCanEnumerate) {
  ::setenv("FAKE_NVML_FIXTURE", FixturePath("2-gpu-mig.yaml").c_str(), 1);
  void* h = ::dlopen((FakeNvmlDir() + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr);
  auto init = reinterpret_cast<nvmlInit_v2_fn>(::dlsym(h, "nvmlInit_v2"));
  auto by_bus = reinterpret_cast<nvmlDeviceGetHandleByPciBusId_v2_fn>(
      ::dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto pci = reinterpret_cast<nvmlDeviceGetPciInfo_v3_fn>(::dlsym(h, "nvmlDeviceGetPciInfo_v3"));
  auto mig = reinterpret_cast<nvmlDeviceGetMigDeviceHandleByIndex_fn>(
      ::dlsym(h, "nvmlDeviceGetMigDeviceHandleByIndex"));
  auto parent = reinterpret_cast<nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>(
      ::dlsym(h, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"));
  auto is_mig =
      reinterpret_cast<nvmlDeviceIsMigDeviceHandle_fn>(::dlsym(h, "nvmlDeviceIsMigDeviceHandle"));
  ASSERT_EQ(init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(by_bus("0000:07:00.0", &dev), NVML_SUCCESS);
  nvmlPciInfo_t info;
  std::memset(&info, 0xab, sizeof info);
  ASSERT_EQ(pci(dev, &info), NVML_SUCCESS);
  const unsigned char* raw = reinterpret_cast<const unsigned char*>(&info);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(raw + 36)), "00000000:07:00.0");
  EXPECT_EQ(info.bus, 7u);
  EXPECT_EQ(info.domain, 0u);
  nvmlDevice_t m = nullptr;
  ASSERT_EQ(mig(dev, 1, &m), NVML_SUCCESS);
  unsigned flag = 0;
  ASSERT_EQ(is_mig(m, &flag), NVML_SUCCESS);
  EXPECT_EQ(flag, 1u);
  nvmlDevice_t back = nullptr;
  ASSERT_EQ(parent(m, &back), NVML_SUCCESS);
  EXPECT_EQ(back, dev);
  EXPECT_EQ(mig(dev, 3, &m), NVML_ERROR_NOT_FOUND);  // an empty slot
}

// Hardware has no way back from off the bus but a reset: the stand-in has
// no "restore", and a lost GPU answers again only after "reset".
// The 8-GPU PCIe stand-in with its control FIFO, for tests that drive it.
struct ControlledNvml {
  DriverRoot root;
  TempDir dir;
  const std::string ctl = dir.Join("ctl");
  std::unique_ptr<NvmlLibrary> lib = Open(root, ctl);

  static std::unique_ptr<NvmlLibrary> Open(const DriverRoot& root, const std::string& ctl) {
    ::setenv("FAKE_NVML_CONTROL", ctl.c_str(), 1);
    return OpenWithFixture(root, FixturePath("8-gpu-pcie.yaml"));
  }
};

TEST(FakeNvmlTest, OnlyAResetBringsALostGpuBack) {
  ControlledNvml nvml;
  ASSERT_TRUE(nvml.lib && nvml.lib->Init().ok());
  NvmlLibrary* lib = nvml.lib.get();
  const std::string& ctl = nvml.ctl;
  auto answer = [&] {
    nvmlDevice_t dev = nullptr;
    return lib->fn().DeviceGetHandleByIndex(3, &dev);
  };
  ASSERT_EQ(answer(), NVML_SUCCESS);
  ASSERT_TRUE(WriteFifo(ctl, "lose 3"));
  EXPECT_EQ(answer(), NVML_ERROR_GPU_IS_LOST);
  ASSERT_TRUE(WriteFifo(ctl, "restore 3"));
  EXPECT_EQ(answer(), NVML_ERROR_GPU_IS_LOST);
  ASSERT_TRUE(WriteFifo(ctl, "reset 3"));
  EXPECT_EQ(answer(), NVML_SUCCESS);
}

// As nvml.h documents: a lookup by UUID answers GPU_IS_LOST while ANY GPU
// is off the bus, a lookup by index only for the lost GPU itself, and a
// handle taken before answers for its own GPU.
TEST(FakeNvmlTest, UuidLookupsFailWhileAnyGpuIsLost) {
  ControlledNvml nvml;
  ASSERT_TRUE(nvml.lib && nvml.lib->Init().ok());
  NvmlLibrary* lib = nvml.lib.get();
  const std::string& ctl = nvml.ctl;
  const NvmlFunctions& f = lib->fn();
  nvmlDevice_t two = nullptr;
  ASSERT_EQ(f.DeviceGetHandleByIndex(2, &two), NVML_SUCCESS);
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  ASSERT_EQ(f.DeviceGetUUID(two, uuid, sizeof uuid), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(f.DeviceGetHandleByUUID(uuid, &dev), NVML_SUCCESS);
  ASSERT_TRUE(WriteFifo(ctl, "lose 5"));
  EXPECT_EQ(f.DeviceGetHandleByUUID(uuid, &dev), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(f.DeviceGetHandleByIndex(2, &dev), NVML_SUCCESS);
  EXPECT_EQ(f.DeviceGetHandleByIndex(5, &dev), NVML_ERROR_GPU_IS_LOST);
  nvmlMemory_t mem{};
  EXPECT_EQ(f.DeviceGetMemoryInfo(two, &mem), NVML_SUCCESS);
  ASSERT_TRUE(WriteFifo(ctl, "reset 5"));
  EXPECT_EQ(f.DeviceGetHandleByUUID(uuid, &dev), NVML_SUCCESS);
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
