// The CDI spec the generator builds from a GeneratorInput, over a fake
// driver root and dev root: one device per name with its nodes, "all", the
// common edits (control nodes, the driver's files, the hooks or the mounts
// that stand in for them), host paths under the driver and dev roots, and a
// clear error for each bad input.
#include "cdi/generator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <utility>

#include "base/strings.h"
#include "support/test_support.h"

namespace gpu_agent::cdi {
namespace {

using gpu_agent::testing::TempDir;
using gpu_agent::testing::WriteFakeDevRoot;
using gpu_agent::testing::WriteFakeDriverRoot;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr char kVersion[] = "550.54.15";
constexpr char kLib[] = "/usr/lib/x86_64-linux-gnu";

std::vector<std::string> Names(const Spec& s) {
  std::vector<std::string> out;
  for (const Device& d : s.devices) out.push_back(d.name);
  return out;
}

// Device nodes as "path<-hostPath".
std::vector<std::string> Nodes(const ContainerEdits& e) {
  std::vector<std::string> out;
  for (const DeviceNode& n : e.device_nodes) out.push_back(StrCat(n.path, "<-", n.host_path));
  return out;
}

// Mounts as "containerPath<-hostPath".
std::vector<std::string> Mounts(const ContainerEdits& e) {
  std::vector<std::string> out;
  for (const Mount& m : e.mounts) out.push_back(StrCat(m.container_path, "<-", m.host_path));
  return out;
}

const Hook* FindHook(const ContainerEdits& e, const std::string& name) {
  for (const Hook& h : e.hooks) {
    for (const std::string& a : h.args) {
      if (a == name) return &h;
    }
  }
  return nullptr;
}

// The versioned files WriteFakeDriverRoot leaves that are utility or
// compute libraries, in the generator's order, each with its links.
std::vector<std::pair<std::string, std::vector<std::string>>> Libraries() {
  auto lib = [](const std::string& name, std::vector<std::string> links) {
    for (std::string& l : links) l = StrCat(kLib, "/", l);
    return std::make_pair(StrCat(kLib, "/", name, ".", kVersion), links);
  };
  return {lib("libnvidia-ml.so", {"libnvidia-ml.so", "libnvidia-ml.so.1"}),
          lib("libnvidia-cfg.so", {"libnvidia-cfg.so", "libnvidia-cfg.so.1"}),
          lib("libcuda.so", {"libcuda.so", "libcuda.so.1"}),
          lib("libcudadebugger.so", {"libcudadebugger.so.1"}),
          lib("libnvidia-opencl.so", {"libnvidia-opencl.so.1"}),
          lib("libnvidia-gpucomp.so", {}),
          lib("libnvidia-ptxjitcompiler.so",
              {"libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1"}),
          lib("libnvidia-allocator.so", {"libnvidia-allocator.so", "libnvidia-allocator.so.1"}),
          lib("libnvidia-pkcs11-openssl3.so", {}),
          lib("libnvidia-nvvm.so", {"libnvidia-nvvm.so", "libnvidia-nvvm.so.4"})};
}

// What a container gets mounted of the driver, host paths under `root`:
// each library, then (without the create-symlinks hook) each of its links
// as the file itself; the binaries; the firmware.
std::vector<std::string> DriverMounts(const std::string& root, bool links) {
  std::vector<std::string> out;
  auto host = [&](const std::string& p) { return root == "/" ? p : StrCat(root, p); };
  for (const auto& [file, names] : Libraries()) {
    out.push_back(StrCat(file, "<-", host(file)));
    if (!links) continue;
    for (const std::string& n : names) out.push_back(StrCat(n, "<-", host(file)));
  }
  for (const char* bin : {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                          "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}) {
    const std::string p = StrCat("/usr/bin/", bin);
    out.push_back(StrCat(p, "<-", host(p)));
  }
  for (const char* fw : {"gsp_ga10x.bin", "gsp_tu10x.bin"}) {
    const std::string p = StrCat("/lib/firmware/nvidia/", kVersion, "/", fw);
    out.push_back(StrCat(p, "<-", host(p)));
  }
  return out;
}

// The create-symlinks hook's "--link <file>::<link>" pairs.
std::vector<std::string> LinkArgs() {
  std::vector<std::string> out;
  for (const auto& [file, names] : Libraries()) {
    for (const std::string& n : names) {
      out.push_back("--link");
      out.push_back(StrCat(file.substr(file.rfind('/') + 1), "::", n));
    }
  }
  return out;
}

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteFakeDriverRoot(driver_here_, kVersion));
    WriteFakeDevRoot(dev_here_, {0, 1}, {12, 13}, /*char_devices=*/false);
    ASSERT_TRUE(std::filesystem::exists(dev_here_ + "/dev/nvidiactl"));
  }

  // A host process on a node with the driver installed under
  // /run/nvidia/driver (as the GPU operator does) and /dev at /: two GPUs,
  // the first with a MIG device.
  GeneratorInput Input() const {
    GeneratorInput in;
    in.kind = "nvidia.com/gpu";
    in.driver_version = kVersion;
    in.library_folders = {kLib};
    in.driver_root = "/run/nvidia/driver";
    in.dev_root = "/";
    in.driver_root_here = driver_here_;
    in.dev_root_here = dev_here_;
    in.devices = {
        {{"GPU-0aaa", "0"}, {"/dev/nvidia0"}, "GPU 0 (GPU-0aaa)"},
        {{"MIG-a", "0:0"},
         {"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13"},
         "MIG device 0:0 (MIG-a)"},
        {{"GPU-1aaa", "1"}, {"/dev/nvidia1"}, "GPU 1 (GPU-1aaa)"}};
    in.gpus_listed = 2;
    return in;
  }

  // An executable file at `path` here.
  static void WriteTool(const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
  }

  TempDir dir_;
  const std::string driver_here_ = dir_.Join("driver");
  const std::string dev_here_ = dir_.Join("devroot");
};

TEST_F(GeneratorTest, OneDevicePerNameWithItsNodesAndAllWithEveryNodeOnce) {
  absl::StatusOr<Generated> g = Generate(Input());
  ASSERT_TRUE(g.ok()) << g.status();
  const Spec& s = g->spec;
  EXPECT_EQ(s.kind, "nvidia.com/gpu");
  EXPECT_THAT(Names(s), ElementsAre("GPU-0aaa", "0", "MIG-a", "0:0", "GPU-1aaa", "1", "all"));
  const std::vector<std::string> mig = {
      "/dev/nvidia0<-/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12<-/dev/nvidia-caps/nvidia-cap12",
      "/dev/nvidia-caps/nvidia-cap13<-/dev/nvidia-caps/nvidia-cap13"};
  EXPECT_THAT(Nodes(s.devices[0].edits), ElementsAre("/dev/nvidia0<-/dev/nvidia0"));
  EXPECT_EQ(Nodes(s.devices[1].edits), Nodes(s.devices[0].edits));
  EXPECT_THAT(Nodes(s.devices[2].edits), ElementsAreArray(mig));
  EXPECT_EQ(Nodes(s.devices[3].edits), Nodes(s.devices[2].edits));
  EXPECT_THAT(Nodes(s.devices[4].edits), ElementsAre("/dev/nvidia1<-/dev/nvidia1"));
  EXPECT_THAT(Nodes(s.devices[6].edits),
              ElementsAre("/dev/nvidia0<-/dev/nvidia0",
                          "/dev/nvidia-caps/nvidia-cap12<-/dev/nvidia-caps/nvidia-cap12",
                          "/dev/nvidia-caps/nvidia-cap13<-/dev/nvidia-caps/nvidia-cap13",
                          "/dev/nvidia1<-/dev/nvidia1"));
  // A device carries its nodes only: the driver is in the spec's edits.
  for (const Device& d : s.devices) {
    EXPECT_THAT(d.edits.env, IsEmpty()) << d.name;
    EXPECT_THAT(d.edits.mounts, IsEmpty()) << d.name;
    EXPECT_THAT(d.edits.hooks, IsEmpty()) << d.name;
  }
  EXPECT_THAT(g->notes, IsEmpty());
}

TEST_F(GeneratorTest, CommonEditsWithoutHooksMountTheDriverAndItsLinks) {
  absl::StatusOr<Generated> g = Generate(Input());
  ASSERT_TRUE(g.ok()) << g.status();
  const ContainerEdits& e = g->spec.edits;
  EXPECT_THAT(e.env, ElementsAre("NVIDIA_VISIBLE_DEVICES=void"));
  // nvidia-modeset is not on this node: left out, not an error.
  EXPECT_THAT(Nodes(e),
              ElementsAre("/dev/nvidiactl<-/dev/nvidiactl", "/dev/nvidia-uvm<-/dev/nvidia-uvm",
                          "/dev/nvidia-uvm-tools<-/dev/nvidia-uvm-tools"));
  // Host paths under the driver root; libnvidia-encode (not a utility or
  // compute library) is not there.
  EXPECT_THAT(Mounts(e), ElementsAreArray(DriverMounts("/run/nvidia/driver", /*links=*/true)));
  for (const Mount& m : e.mounts) {
    EXPECT_THAT(m.options, ElementsAre("ro", "nosuid", "nodev", "bind")) << m.container_path;
  }
  EXPECT_THAT(e.hooks, IsEmpty());
}

TEST_F(GeneratorTest, DevRootAtTheDriverRootNamesHostPathsUnderIt) {
  GeneratorInput in = Input();
  in.dev_root = "/run/nvidia/driver/";
  absl::StatusOr<Generated> g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(Nodes(g->spec.devices[0].edits),
              ElementsAre("/dev/nvidia0<-/run/nvidia/driver/dev/nvidia0"));
  EXPECT_EQ(Nodes(g->spec.edits)[0], "/dev/nvidiactl<-/run/nvidia/driver/dev/nvidiactl");
}

TEST_F(GeneratorTest, HooksMakeTheLinksAndUpdateTheCacheInsteadOfLinkMounts) {
  GeneratorInput in = Input();
  in.hook_tool = dir_.Join("host-bin/nvidia-ctk");
  WriteTool(in.hook_tool);
  absl::StatusOr<Generated> g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  const ContainerEdits& e = g->spec.edits;
  EXPECT_THAT(Mounts(e), ElementsAreArray(DriverMounts("/run/nvidia/driver", /*links=*/false)));
  ASSERT_EQ(e.hooks.size(), 2u);
  std::vector<std::string> links = {"nvidia-ctk", "hook", "create-symlinks"};
  for (const std::string& a : LinkArgs()) links.push_back(a);
  EXPECT_EQ(e.hooks[0].hook_name, "createContainer");
  EXPECT_EQ(e.hooks[0].path, in.hook_tool);
  EXPECT_THAT(e.hooks[0].args, ElementsAreArray(links));
  EXPECT_EQ(e.hooks[1].hook_name, "createContainer");
  EXPECT_EQ(e.hooks[1].path, in.hook_tool);
  EXPECT_THAT(e.hooks[1].args,
              ElementsAre("nvidia-ctk", "hook", "update-ldcache", "--folder", kLib));
  EXPECT_THAT(g->notes, IsEmpty());

  // nvidia-cdi-hook takes the hook's name first.
  in.hook_tool = dir_.Join("host-bin/nvidia-cdi-hook");
  WriteTool(in.hook_tool);
  g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->spec.edits.hooks.size(), 2u);
  EXPECT_THAT(g->spec.edits.hooks[1].args,
              ElementsAre("nvidia-cdi-hook", "update-ldcache", "--folder", kLib));
}

TEST_F(GeneratorTest, DisabledHooksAreLeftOutOneByOne) {
  GeneratorInput in = Input();
  in.hook_tool = dir_.Join("host-bin/nvidia-ctk");
  WriteTool(in.hook_tool);

  in.disabled_hooks = {"create-symlinks"};
  absl::StatusOr<Generated> g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(FindHook(g->spec.edits, "create-symlinks"), nullptr);
  EXPECT_NE(FindHook(g->spec.edits, "update-ldcache"), nullptr);
  // What the hook would have made is mounted.
  EXPECT_THAT(Mounts(g->spec.edits),
              ElementsAreArray(DriverMounts("/run/nvidia/driver", /*links=*/true)));

  in.disabled_hooks = {"update-ldcache"};
  g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NE(FindHook(g->spec.edits, "create-symlinks"), nullptr);
  EXPECT_EQ(FindHook(g->spec.edits, "update-ldcache"), nullptr);
  EXPECT_THAT(Mounts(g->spec.edits),
              ElementsAreArray(DriverMounts("/run/nvidia/driver", /*links=*/false)));

  in.disabled_hooks = {"all"};
  g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->spec.edits.hooks, IsEmpty());
  EXPECT_THAT(Mounts(g->spec.edits),
              ElementsAreArray(DriverMounts("/run/nvidia/driver", /*links=*/true)));
  EXPECT_THAT(g->notes, IsEmpty());  // asked for: nothing to tell
}

TEST_F(GeneratorTest, AHookToolThatIsNotThereIsANoteAndTheLinksAreMounted) {
  GeneratorInput in = Input();
  in.hook_tool = dir_.Join("nowhere/nvidia-ctk");
  absl::StatusOr<Generated> g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->spec.edits.hooks, IsEmpty());
  EXPECT_THAT(Mounts(g->spec.edits),
              ElementsAreArray(DriverMounts("/run/nvidia/driver", /*links=*/true)));
  EXPECT_THAT(
      g->notes,
      ElementsAre(StrCat("no CDI hooks: ", in.hook_tool, " is not there (looked at ", in.hook_tool,
                         "); the library links are mounted instead and the container's "
                         "loader cache is not updated")));
}

// In a container whose host root is the driver root, mounted at
// container_driver_root: host paths are the driver's own, and the host's
// hook tool is looked for under the mount.
TEST_F(GeneratorTest, ContainerDriverRootIsWhereTheHostToolIsLookedFor) {
  GeneratorInput in = Input();
  in.driver_root = "/";
  in.container_driver_root = driver_here_;
  in.hook_tool = "/usr/local/bin/nvidia-ctk";
  WriteTool(driver_here_ + in.hook_tool);
  absl::StatusOr<Generated> g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(Mounts(g->spec.edits), ElementsAreArray(DriverMounts("/", /*links=*/false)));
  ASSERT_EQ(g->spec.edits.hooks.size(), 2u);
  EXPECT_EQ(g->spec.edits.hooks[0].path, "/usr/local/bin/nvidia-ctk");  // the host's path
  EXPECT_THAT(g->notes, IsEmpty());

  // Not under the mount: a note naming where it was looked for.
  in.hook_tool = "/usr/bin/nvidia-ctk-elsewhere";
  g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->spec.edits.hooks, IsEmpty());
  ASSERT_EQ(g->notes.size(), 1u);
  EXPECT_EQ(g->notes[0].substr(0, g->notes[0].find(';')),
            StrCat("no CDI hooks: /usr/bin/nvidia-ctk-elsewhere is not there (looked at ",
                   driver_here_, "/usr/bin/nvidia-ctk-elsewhere)"));

  // A driver root other than the host's root: the host's tool cannot be
  // seen from the container at all.
  in.driver_root = "/run/nvidia/driver";
  in.hook_tool = "/usr/local/bin/nvidia-ctk";
  g = Generate(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->spec.edits.hooks, IsEmpty());
  EXPECT_THAT(Mounts(g->spec.edits),
              ElementsAreArray(DriverMounts("/run/nvidia/driver", /*links=*/true)));
  ASSERT_EQ(g->notes.size(), 1u);
  EXPECT_EQ(g->notes[0].substr(0, g->notes[0].find(';')),
            "no CDI hooks: /usr/local/bin/nvidia-ctk cannot be checked from this container (the "
            "host's root is not the mounted driver root)");
}

struct BadInput {
  std::string name;
  std::function<void(GeneratorInput*, const std::string& dev_here)> change;
  absl::StatusCode code;
  std::string message;  // "<dev>" stands for the dev root here
};

TEST_F(GeneratorTest, BadInputsFailNamingWhatAndWhere) {
  const std::vector<BadInput> cases = {
      {"no driver version", [](GeneratorInput* in, const std::string&) { in->driver_version = ""; },
       absl::StatusCode::kFailedPrecondition,
       "NVML reported no driver version, which the driver's files are found by"},
      {"no device", [](GeneratorInput* in, const std::string&) { in->devices.clear(); },
       absl::StatusCode::kNotFound,
       "no GPU is exposed on this node (NVML lists 2; see devices.include/exclude/max): a CDI "
       "spec needs at least one device"},
      {"missing device node",
       [](GeneratorInput* in, const std::string&) {
         in->devices.push_back({{"GPU-7aaa"}, {"/dev/nvidia7"}, "GPU 7 (GPU-7aaa)"});
       },
       absl::StatusCode::kNotFound,
       "GPU 7 (GPU-7aaa): device node /dev/nvidia7 is not under the dev root / (looked at "
       "<dev>/dev/nvidia7)"},
      {"no nvidiactl",
       [](GeneratorInput*, const std::string& dev) {
         std::filesystem::remove(dev + "/dev/nvidiactl");
       },
       absl::StatusCode::kNotFound,
       "the driver: device node /dev/nvidiactl is not under the dev root / (looked at "
       "<dev>/dev/nvidiactl)"},
      {"another driver version",
       [](GeneratorInput* in, const std::string&) { in->driver_version = "550.90.07"; },
       absl::StatusCode::kNotFound, "the driver's libnvidia-ml.so.550.90.07"},
      {"kind without class",
       [](GeneratorInput* in, const std::string&) { in->kind = "nvidia.com"; },
       absl::StatusCode::kInvalidArgument, "CDI kind \"nvidia.com\" is not <vendor>/<class>"},
      {"bad device name",
       [](GeneratorInput* in, const std::string&) { in->devices[0].names = {"GPU 0"}; },
       absl::StatusCode::kInvalidArgument,
       "invalid CDI device name \"GPU 0\": character ' ' at position 4 is not allowed (only "
       "letters, digits and '_', '-', '.', ':')"},
      {"a name twice",
       [](GeneratorInput* in, const std::string&) {
         in->devices[2].names = {"GPU-1aaa", "0"};
       },
       absl::StatusCode::kInvalidArgument, "CDI device nvidia.com/gpu=0 is listed twice"},
      {"a device named all",
       [](GeneratorInput* in, const std::string&) { in->devices[2].names = {"all"}; },
       absl::StatusCode::kInvalidArgument, "CDI device nvidia.com/gpu=all is listed twice"},
      {"relative driver root",
       [](GeneratorInput* in, const std::string&) { in->driver_root = "run/nvidia/driver"; },
       absl::StatusCode::kInvalidArgument,
       StrCat("spec containerEdits: mount hostPath \"run/nvidia/driver", kLib,
              "/libnvidia-ml.so.550.54.15\" is not an absolute path")},
  };
  for (const BadInput& c : cases) {
    // Each case on a fresh dev root: one removes a node.
    WriteFakeDevRoot(dev_here_, {0, 1}, {12, 13}, /*char_devices=*/false);
    GeneratorInput in = Input();
    c.change(&in, dev_here_);
    absl::StatusOr<Generated> g = Generate(in);
    ASSERT_FALSE(g.ok()) << c.name;
    EXPECT_EQ(g.status().code(), c.code) << c.name << ": " << g.status();
    std::string want = c.message;
    if (const size_t at = want.find("<dev>"); at != std::string::npos) {
      want.replace(at, 5, dev_here_);
    }
    EXPECT_EQ(std::string(g.status().message()).substr(0, want.size()), want) << c.name;
  }
}

}  // namespace
}  // namespace gpu_agent::cdi
