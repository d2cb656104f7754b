// Plugin mode with MIG: one socket per profile, CDI annotations of two
// resources, MIG devices of a lost GPU, profile names without privileges,
// and the clear errors of a MIG setup that cannot work.
// The fixture: plugin_mode_fixture.h.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "allocate_text.h"
#include "base/strings.h"
#include "integration/plugin_mode_fixture.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kMig1g = "nvidia.com/mig-1g.10gb";
constexpr const char* kMig2g = "nvidia.com/mig-2g.20gb";
// In the 2-gpu-mig fixture: GPU 0's instances 1 (2g.20gb), 2 and 3 (1g.10gb).
constexpr const char* kMigGi1 = "MIG-830ac273-9aa0-574f-9f5c-22f3462d8634";
constexpr const char* kMigGi2 = "MIG-88046736-7ede-57ab-bf0a-d906907fb941";
constexpr const char* kMigGi3 = "MIG-0262095c-56cd-5b2e-903c-5f38b7f3d9b2";

std::string HealthOf(const Devices& devices, const std::string& id) {
  for (const auto& d : devices) {
    if (d.id() == id) return d.health();
  }
  return "absent";
}

TEST_F(PluginModeTest, MixedMigServesEachProfileOnItsOwnSocket) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  dir_.Write("devroot/dev/nvidia0", "");
  dir_.Write("devroot/dev/nvidia1", "");
  dir_.Write("proc/driver/nvidia-caps/mig-minors",
             "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
             "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
             "gpu0/gi3/ci0/access 31\n");
  StartAgent({"--mig-strategy", "mixed", "--pass-device-specs", "--dev-root", dir_.Join("devroot"),
              "--proc-root", dir_.Join("proc")},
             FixturePath("2-gpu-mig.yaml"));
  ASSERT_TRUE(Registered(3)) << Dump();
  std::map<std::string, std::string> endpoint_of;
  for (const auto& r : sim_.registration_requests()) endpoint_of[r.resource_name()] = r.endpoint();
  EXPECT_EQ(endpoint_of, (std::map<std::string, std::string>{{kGpu, "nvidia-gpu.sock"},
                                                             {kMig1g, "nvidia-mig-1g.10gb.sock"},
                                                             {kMig2g, "nvidia-mig-2g.20gb.sock"}}));
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 1; }));
  EXPECT_EQ(sim_.Devices(kMig2g).at(0).id(), kMigGi1);

  // Allocate: the MIG UUID for the runtime, the parent's node and the two
  // capability nodes of that instance.
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(kMigGi2);
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kMig1g, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string root = dir_.Join("devroot");
  EXPECT_EQ(AllocateText(resp.container_responses(0)),
            StrCat(R"(envs { key: "NVIDIA_VISIBLE_DEVICES" value: ")", kMigGi2, R"(" } )",
                   R"(devices { container_path: "/dev/nvidia0" host_path: ")", root,
                   R"(/dev/nvidia0" permissions: "rw" } )",
                   R"(devices { container_path: "/dev/nvidia-caps/nvidia-cap21" host_path: ")",
                   root, R"(/dev/nvidia-caps/nvidia-cap21" permissions: "rw" } )",
                   R"(devices { container_path: "/dev/nvidia-caps/nvidia-cap22" host_path: ")",
                   root, R"(/dev/nvidia-caps/nvidia-cap22" permissions: "rw" })"));
  // A whole-GPU ID is unknown to a MIG resource.
  v1beta1::AllocateRequest wrong;
  wrong.add_container_requests()->add_devices_ids(FixtureUuids(FixturePath("2-gpu-mig.yaml"))[1]);
  EXPECT_EQ(sim_.Allocate(kMig1g, wrong, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // An XID NVML scopes to GPU instance 2 takes out that MIG device only.
  Nvml("xid 0 94 2 0");
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) {
    return HealthOf(d, kMigGi2) == "Unhealthy" && HealthOf(d, kMigGi3) == "Healthy";
  })) << Dump();
  EXPECT_EQ(HealthOf(sim_.Devices(kMig2g), kMigGi1), "Healthy");
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return CountHealthy(d) == 2; }))
      << Dump();
  // An XID on the whole GPU takes out every MIG device on it, and nothing else.
  Nvml("xid 0 79");
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return CountHealthy(d) == 0; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return CountHealthy(d) == 0; }));
  EXPECT_EQ(CountHealthy(sim_.Devices(kGpu)), 1);
}

// One container asking for two MIG profiles: the kubelet calls Allocate on
// each resource's plugin and merges the answers' annotations, the first of
// two equal keys winning. Each answer's CDI annotation key is its own, so
// the container gets both devices.
TEST_F(PluginModeTest, TwoResourcesInOneContainerKeepBothCdiAnnotations) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  // What the CDI spec the agent writes needs: driver files, nodes, MIG caps.
  ASSERT_TRUE(WriteFakeDriverRoot(dir_.Join("driver"), "550.54.15"));
  WriteFakeDevRoot(dir_.Join("devroot"), {0, 1}, {12, 13, 21, 22, 30, 31}, false);
  dir_.Write("proc/driver/nvidia-caps/mig-minors",
             "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\n"
             "gpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\ngpu0/gi3/ci0/access 31\n");
  StartAgent({"--mig-strategy", "mixed", "--device-list-strategy", "cdi-annotations,cdi-cri",
              "--cdi-spec-dir", dir_.Join("cdi"), "--nvidia-driver-root", dir_.Join("driver"),
              "--dev-root", dir_.Join("devroot"), "--proc-root", dir_.Join("proc")},
             FixturePath("2-gpu-mig.yaml"));
  ASSERT_TRUE(sim_.WaitForAllocatable(kMig1g, 2, std::chrono::seconds(10))) << Dump();
  ASSERT_TRUE(sim_.WaitForAllocatable(kMig2g, 1, std::chrono::seconds(10))) << Dump();
  std::vector<v1beta1::ContainerAllocateResponse> responses;
  for (const auto& [resource, id] : {std::pair{kMig1g, kMigGi2}, std::pair{kMig2g, kMigGi1}}) {
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::Status s = sim_.Allocate(resource, req, &resp);
    ASSERT_TRUE(s.ok()) << resource << ": " << s.error_message();
    responses.push_back(resp.container_responses(0));
  }
  // As the kubelet merges them: first key wins, CDI devices once each.
  const auto merged = KubeletSimulator::MergeForContainer(responses);
  EXPECT_TRUE(merged.conflicts.empty()) << merged.conflicts.front();
  std::set<std::string> names;
  for (const auto& [k, v] : merged.annotations) names.insert(v);
  const std::set<std::string> want = {StrCat("gpu-agent.github.io/gpu=", kMigGi2),
                                      StrCat("gpu-agent.github.io/gpu=", kMigGi1)};
  EXPECT_EQ(names, want);
  EXPECT_EQ(std::set<std::string>(merged.cdi_devices.begin(), merged.cdi_devices.end()), want);
  EXPECT_EQ(merged.cdi_devices.size(), 2u);
}

// A GPU NVML calls lost at discovery takes its MIG devices out; when it
// answers again they come back with it (their outage is the GPU's, kept as
// the health watcher reports and clears it).
TEST_F(PluginModeTest, MigDevicesOfAGpuLostAtDiscoveryComeBackWithIt) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  std::string text = ReadFile(FixturePath("2-gpu-mig.yaml"));
  const std::string gpu0 = "  - uuid: GPU-ed474d47-acdb-5d33-bc5a-38d1d781b523\n";
  ASSERT_NE(text.find(gpu0), std::string::npos);
  // One discovery query answers GPU_IS_LOST (15); the GPU answers again by
  // the time the watcher probes it.
  text.replace(text.find(gpu0), gpu0.size(),
               gpu0 + "    fail:\n      nvmlDeviceGetMinorNumber: 15\n");
  StartAgent({"--mig-strategy", "mixed"}, dir_.Write("lost-mig.yaml", text));
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return CountHealthy(d) == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return CountHealthy(d) == 1; }))
      << Dump();
  // They did start out: the first update the kubelet saw had them all out.
  const auto updates = sim_.Updates(kMig1g);
  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(CountHealthy(updates.front().devices), 0);
}

// The 2-gpu-mig fixture with `extra` lines under GPU `gpu`'s uuid and
// `top` lines at the top.
std::string MigFixtureWith(const TempDir& dir, const std::string& name, int gpu,
                           const std::string& extra, const std::string& top = "") {
  std::string text = ReadFile(FixturePath("2-gpu-mig.yaml"));
  const std::string line =
      StrCat("  - uuid: ", FixtureUuids(FixturePath("2-gpu-mig.yaml"))[gpu], "\n");
  EXPECT_NE(text.find(line), std::string::npos);
  text.replace(text.find(line), line.size(), line + extra);
  return dir.Write(name, top + text);
}

// In a container without CAP_SYS_ADMIN NVML refuses the memory of a
// MIG-enabled GPU, which the profile names were once computed from; they
// come from the GPU's instance profiles instead, with NVML's own names or,
// from a driver without them (before R510), their memory sizes.
TEST_F(PluginModeTest, MigProfilesAreNamedInAnUnprivilegedContainer) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  StartAgent({"--mig-strategy", "mixed"},
             dir_.Write("unprivileged.yaml",
                        "privileged: false\n" + ReadFile(FixturePath("2-gpu-mig.yaml"))));
  ASSERT_TRUE(Registered(3)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  EXPECT_EQ(sim_.Devices(kMig2g).at(0).id(), kMigGi1);
  EXPECT_EQ(CountHealthy(sim_.Devices(kMig1g)), 2);
  EXPECT_NE(Dump().find("Insufficient Permissions"), std::string::npos) << Dump();
  EXPECT_EQ(Dump().find("has no profile name"), std::string::npos) << Dump();
}

TEST_F(PluginModeTest, MigProfilesAreNamedUnprivilegedOnADriverWithoutProfileNames) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  StartAgent({"--mig-strategy", "mixed"},
             MigFixtureWith(dir_, "old.yaml", 0,
                            "    fail:\n      nvmlDeviceGetGpuInstanceProfileInfoV: 13\n",
                            "privileged: false\n"));
  ASSERT_TRUE(Registered(3)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  EXPECT_EQ(sim_.Devices(kMig2g).at(0).id(), kMigGi1);
}

// A GPU whose MIG mode NVML cannot tell is not handed out whole under a MIG
// strategy: it may be in MIG mode, where a pod given it finds no CUDA
// device. The log names the GPU and NVML's error.
TEST_F(PluginModeTest, GpuWhoseMigModeIsUnknownIsNotAdvertisedWhole) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  StartAgent(
      {"--mig-strategy", "mixed"},
      MigFixtureWith(dir_, "unknown.yaml", 1, "    fail:\n      nvmlDeviceGetMigMode: 999\n"));
  const std::string gpu1 = FixtureUuids(FixturePath("2-gpu-mig.yaml"))[1];
  ASSERT_TRUE(agent_->WaitForStderr(StrCat("GPU 1 (", gpu1,
                                           ") is not advertised: its MIG mode is "
                                           "unknown (nvmlDeviceGetMigMode: Unknown Error (999))")))
      << Dump();
  ASSERT_TRUE(Registered(2)) << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 2; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  std::set<std::string> resources;
  for (const auto& r : sim_.registration_requests()) resources.insert(r.resource_name());
  EXPECT_EQ(resources, (std::set<std::string>{kMig1g, kMig2g}));
}

TEST_F(PluginModeTest, ShippedMigExampleConfigWithARealDriverTable) {
  ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  dir_.Write("proc/driver/nvidia-caps/mig-minors",
             ReadFile(SourceDir() + "/tests/fixtures/proc/mig-minors"));
  StartAgent({"--config", SourceDir() + "/config/mig-mixed.yaml", "--proc-root", dir_.Join("proc")},
             FixturePath("2-gpu-mig.yaml"));
  ASSERT_TRUE(Registered(3)) << Dump();
  // The two 1g.10gb devices shared two ways; the 2g.20gb and the whole GPU as they are.
  ASSERT_TRUE(sim_.WaitForDevices(kMig1g, [](const Devices& d) { return d.size() == 4; }))
      << Dump();
  ASSERT_TRUE(sim_.WaitForDevices(kMig2g, [](const Devices& d) { return d.size() == 1; }));
  ASSERT_TRUE(sim_.WaitForDevices(kGpu, [](const Devices& d) { return d.size() == 1; }));
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(StrCat(kMigGi3, "::1"));
  v1beta1::AllocateResponse resp;
  grpc::Status s = sim_.Allocate(kMig1g, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string text = AllocateText(resp.container_responses(0));
  // gpu0/gi3/access and gpu0/gi3/ci0/access in the H100 driver's table.
  EXPECT_NE(text.find("/dev/nvidia-caps/nvidia-cap30"), std::string::npos) << text;
  EXPECT_NE(text.find("/dev/nvidia-caps/nvidia-cap31"), std::string::npos) << text;
  EXPECT_NE(text.find(StrCat(R"(value: ")", kMigGi3, R"(")")), std::string::npos) << text;
}

TEST_F(PluginModeTest, SingleMigStrategyOnMixedGpusIsAClearError) {
  RunResult r = RunAgent({"run", "--mig-strategy", "single", "--kubelet-socket", sim_.socket()},
                         FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("flags.migStrategy single needs every GPU in MIG mode, but GPU(s) 1 are "
                       "not"),
            std::string::npos)
      << r.err;
}

TEST_F(PluginModeTest, MissingMigMinorsWithDeviceSpecsIsAClearError) {
  RunResult r = RunAgent({"run", "--mig-strategy", "mixed", "--pass-device-specs", "--proc-root",
                          dir_.Join("proc"), "--kubelet-socket", sim_.socket()},
                         FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(
      r.err.find(dir_.Join("proc/driver/nvidia-caps/mig-minors") + ": cannot read it (missing)"),
      std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace gpu_agent::testing
