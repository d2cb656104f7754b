// CDI end to end through the real binary: `gpu-agent cdi generate` against
// the NVML stand-in, a driver root laid out like an installed driver's and a
// dev root (character devices where this test may mknod); plugin mode
// writing the spec, Allocate naming only devices it defines, and removing
// the spec on exit; and every bad input with its message.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/strings.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kVersion = "550.54.15";
constexpr const char* kKind = "gpu-agent.github.io/gpu";

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// A listening unix socket at `path`, as nvidia-persistenced leaves one.
bool MakeSocket(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

std::set<std::string> DeviceNames(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  std::set<std::string> out;
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("devices")) return out;
  for (const auto& dev : d["devices"].GetArray()) out.insert(dev["name"].GetString());
  return out;
}

class CdiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteFakeDriverRoot(dir_.Join("driver"), kVersion));
    ASSERT_TRUE(MakeSocket(dir_.Join("driver/run/nvidia-persistenced/socket")));
    char_devices_ =
        WriteFakeDevRoot(dir_.Join("devroot"), {0, 1}, {12, 13, 21, 22, 30, 31}, ::geteuid() == 0);
    if (!char_devices_) {
      std::printf(
          "note: cannot mknod here (not root): device nodes are empty files, so the "
          "character-device part of these tests is skipped\n");
    }
    dir_.Write("proc/driver/nvidia-caps/mig-minors",
               "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
               "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\n"
               "gpu0/gi3/ci0/access 31\n");
    ASSERT_TRUE(WriteFixtureSysfs(FixturePath("2-gpu-mig.yaml"), dir_.Join("sys")));
  }

  std::vector<std::string> Roots() const {
    return {"--nvidia-driver-root", dir_.Join("driver"), "--dev-root",   dir_.Join("devroot"),
            "--proc-root",          dir_.Join("proc"),   "--sysfs-root", dir_.Join("sys")};
  }

  RunResult Generate(std::vector<std::string> extra, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {"cdi", "generate", "--mig-strategy", "mixed"};
    for (const std::string& a : Roots()) args.push_back(a);
    const bool hook_given =
        env.count("NVIDIA_CDI_HOOK_PATH") > 0 ||
        std::find(extra.begin(), extra.end(), "--nvidia-ctk-path") != extra.end() ||
        std::find(extra.begin(), extra.end(), "--nvidia-cdi-hook-path") != extra.end();
    if (!hook_given) {
      args.insert(args.end(), {"--nvidia-cdi-hook-path", dir_.Join("no/nvidia-ctk")});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    auto full = FakeNvmlEnv(FixturePath("2-gpu-mig.yaml"));
    for (auto& [k, v] : env) full[k] = v;
    return RunAgent(args, full);
  }

  // The expected spec in tests/fixtures/cdi, ROOT standing for the test's
  // folder. GPU_AGENT_UPDATE_GOLDEN=1 rewrites it from `got` (review the diff).
  std::string Golden(const std::string& name, const std::string& got) const {
    const std::string file = SourceDir() + "/tests/fixtures/cdi/" + name;
    if (const char* update = std::getenv("GPU_AGENT_UPDATE_GOLDEN"); update && *update == '1') {
      std::ofstream(file) << Replace(got, dir_.path(), "ROOT");
    }
    return Replace(ReadFile(file), "ROOT", dir_.path());
  }

  TempDir dir_;
  bool char_devices_ = false;
};

TEST_F(CdiTest, ExactSpecForTheMigFixtureWithoutHooks) {
  RunResult r = Generate({"-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, Golden("2-gpu-mig-mixed.json", r.out));
  // The configured nvidia-ctk is not there: said once, on stderr.
  EXPECT_NE(r.err.find("no CDI hooks: " + dir_.Join("no/nvidia-ctk") + " is not there"),
            std::string::npos)
      << r.err;
}

TEST_F(CdiTest, HooksReplaceLinkMountsWhenNvidiaCtkIsThere) {
  const std::string ctk = dir_.Write("host/usr/bin/nvidia-ctk", "#!/bin/sh\n");
  // NVIDIA's old flag name, kept as an alias.
  RunResult r = Generate({"-o", "json", "--nvidia-ctk-path", ctk});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, Golden("2-gpu-mig-mixed-hooks.json", r.out));
  // nvidia-cdi-hook takes the hook name first, without "hook".
  const std::string hook = dir_.Write("host/usr/bin/nvidia-cdi-hook", "#!/bin/sh\n");
  r = Generate({"-o", "json"}, {{"NVIDIA_CDI_HOOK_PATH", hook}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(R"("nvidia-cdi-hook",
          "update-ldcache",
          "--folder",
          "/usr/lib/x86_64-linux-gnu")"),
            std::string::npos)
      << r.out;
}

TEST_F(CdiTest, YamlIsTheSameSpecAndOutputFileFollowsItsExtension) {
  RunResult json = Generate({"-o", "json"});
  RunResult yaml = Generate({});  // yaml is the default on stdout
  ASSERT_EQ(json.code, 0) << json.err;
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  YAML::Node y = YAML::Load(yaml.out);
  std::set<std::string> names;
  for (const auto& d : y["devices"]) names.insert(d["name"].as<std::string>());
  EXPECT_EQ(names, DeviceNames(json.out));
  // 10 libraries, 14 links to them, 5 binaries, 2 firmware files, 1 socket.
  EXPECT_EQ(y["containerEdits"]["mounts"].size(), 32u);
  EXPECT_EQ(y["cdiVersion"].as<std::string>(), "0.5.0");

  RunResult w = Generate({"--output-file", dir_.Join("out/spec.json")});
  EXPECT_NE(w.code, 0);  // the folder does not exist
  EXPECT_NE(w.err.find("cannot write " + dir_.Join("out/spec.json")), std::string::npos) << w.err;
  std::filesystem::create_directories(dir_.Join("out"));
  w = Generate({"--output-file", dir_.Join("out/spec.json")});
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_EQ(ReadFile(dir_.Join("out/spec.json")), json.out);
  EXPECT_TRUE(w.out.empty());
  w = Generate({"--output-file", dir_.Join("out/spec.yaml")});
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_EQ(ReadFile(dir_.Join("out/spec.yaml")), yaml.out);
}

struct BadCase {
  std::string name;
  std::vector<std::string> args;
  std::string remove;  // a file under the test dir to delete first
  int code;
  std::string error;  // ROOT: the test dir
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class CdiBadInputTest : public CdiTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(CdiBadInputTest, FailsNamingWhatIsWrong) {
  const BadCase& c = GetParam();
  if (!c.remove.empty()) {
    ASSERT_EQ(::unlink(dir_.Join(c.remove).c_str()), 0) << c.remove;
  }
  std::vector<std::string> args;
  for (const std::string& a : c.args) args.push_back(Replace(a, "ROOT", dir_.path()));
  RunResult r = Generate(args);
  EXPECT_EQ(r.code, c.code) << r.err;
  EXPECT_NE(r.err.find(Replace(c.error, "ROOT", dir_.path())), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    All, CdiBadInputTest,
    ::testing::Values(
        BadCase{"UnknownFormat", {"-o", "xml"}, "", 2, "--output is the format (json or yaml)"},
        BadCase{"FileGivenAsOutput",
                {"--output", "ROOT/spec.json"},
                "",
                2,
                "write the spec to a file with --output-file ROOT/spec.json"},
        BadCase{"FormatAgainstExtension",
                {"-o", "yaml", "--output-file", "ROOT/spec.json"},
                "",
                2,
                "--output yaml contradicts --output-file ROOT/spec.json"},
        BadCase{"VendorStartsWithDigit",
                {"--cdi-vendor", "9lives.example"},
                "",
                2,
                "cdi.vendor: invalid CDI vendor \"9lives.example\": it must start with a letter"},
        BadCase{"ClassWithSlash",
                {"--cdi-class", "gpu/a"},
                "",
                2,
                "flag --cdi-class: cdi.class: invalid CDI class \"gpu/a\": character '/' at "
                "position 4 is not allowed"},
        BadCase{"RelativeHookPath",
                {"--nvidia-cdi-hook-path", "nvidia-ctk"},
                "",
                2,
                "flags.plugin.nvidiaCTKPath: \"nvidia-ctk\" must be an absolute path on the host"},
        BadCase{"MissingLibcuda",
                {},
                "driver/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
                1,
                "the driver's libcuda.so.550.54.15 (driver version 550.54.15 as NVML reports it) "
                "is in none of ROOT/driver's library folders"},
        BadCase{"MissingGpuNode",
                {},
                "devroot/dev/nvidia1",
                1,
                "GPU 1 (GPU-bc92a28e-d4f1-504c-a22f-5db7f2725196): device node /dev/nvidia1 is "
                "not under the dev root ROOT/devroot (looked at ROOT/devroot/dev/nvidia1)"},
        BadCase{"MissingNvidiactl",
                {},
                "devroot/dev/nvidiactl",
                1,
                "the driver: device node /dev/nvidiactl is not under the dev root"},
        BadCase{"MissingMigCapNode",
                {},
                "devroot/dev/nvidia-caps/nvidia-cap31",
                1,
                "MIG device 0:2 (MIG-0262095c-56cd-5b2e-903c-5f38b7f3d9b2): device node "
                "/dev/nvidia-caps/nvidia-cap31 is not under the dev root"},
        BadCase{"MissingMigMinors",
                {},
                "proc/driver/nvidia-caps/mig-minors",
                1,
                "MIG device 0:0 (MIG-830ac273-9aa0-574f-9f5c-22f3462d8634) needs its capability "
                "device nodes, listed in mig-minors: ROOT/proc/driver/nvidia-caps/mig-minors"}),
    [](const ::testing::TestParamInfo<BadCase>& p) { return p.param.name; });

// DRA mode's devices, as `dra slices` publishes them and `config --plan`
// lists them, are the same units (MIG devices under a MIG strategy), with
// no device-plugin resources; each has its entry, by UUID, in the CDI spec
// its prepares name.
TEST_F(CdiTest, DraSlicesThePlanAndTheSpecNameTheSameDevices) {
  // What `dra slices` reads (NVML and sysfs), then what a spec needs besides.
  const std::vector<std::string> flags = {
      "--node-name",       "n1",           "--mig-strategy", "mixed", "--nvidia-driver-root",
      dir_.Join("driver"), "--sysfs-root", dir_.Join("sys")};
  const std::vector<std::string> for_spec = {"--dev-root",
                                             dir_.Join("devroot"),
                                             "--proc-root",
                                             dir_.Join("proc"),
                                             "--cdi-spec-dir",
                                             dir_.Join("cdi"),
                                             "--nvidia-cdi-hook-path",
                                             dir_.Join("no/nvidia-ctk")};
  const auto env = FakeNvmlEnv(FixturePath("2-gpu-mig.yaml"));
  std::vector<std::string> args = {"dra", "slices", "-o", "json"};
  args.insert(args.end(), flags.begin(), flags.end());
  RunResult slices = RunAgent(args, env);
  ASSERT_EQ(slices.code, 0) << slices.err;
  rapidjson::Document doc;
  doc.Parse(slices.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << slices.out;
  EXPECT_STREQ(doc["kind"].GetString(), "List");
  ASSERT_EQ(doc["items"].Size(), 1u);
  std::vector<std::string> published;
  std::set<std::string> uuids;
  for (const auto& d : doc["items"][0]["spec"]["devices"].GetArray()) {
    published.emplace_back(d["name"].GetString());
    uuids.insert(d["attributes"]["uuid"]["string"].GetString());
  }
  ASSERT_EQ(published.size(), 4u) << slices.out;  // GPU 0's three MIG devices, GPU 1 whole
  args = {"config", "--plan", "-o", "json", "--mode", "dra"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), for_spec.begin(), for_spec.end());
  RunResult plan = RunAgent(args, env);
  ASSERT_EQ(plan.code, 0) << plan.err;
  doc.Parse(plan.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << plan.out;
  EXPECT_EQ(doc["resources"].Size(), 0u) << plan.out;
  std::vector<std::string> planned;
  for (const auto& d : doc["draDevices"].GetArray()) planned.emplace_back(d.GetString());
  EXPECT_EQ(planned, published);
  std::set<std::string> in_spec;
  for (const auto& d : doc["cdi"]["devices"].GetArray()) in_spec.insert(d.GetString());
  for (const std::string& uuid : uuids) EXPECT_EQ(in_spec.count(uuid), 1u) << uuid;
}

// Plugin mode: the spec is there once the agent serves, every name Allocate
// gives for every advertised device is in it, and it is gone after SIGTERM.
struct StrategyCase {
  std::string name;
  std::string id_strategy;
};

void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.name; }

class CdiPluginTest : public CdiTest, public ::testing::WithParamInterface<StrategyCase> {};

TEST_P(CdiPluginTest, WritesTheSpecAllocateNamesMatchItAndRemovesItOnExit) {
  KubeletSimulator sim(dir_.path());
  ASSERT_TRUE(sim.Start());
  dir_.Write("cdi/someone-else.json", "{}");
  std::vector<std::string> args = {BinaryPath(),
                                   "run",
                                   "--kubelet-socket",
                                   sim.socket(),
                                   "--mig-strategy",
                                   "mixed",
                                   "--device-list-strategy",
                                   "cdi-cri,cdi-annotations",
                                   "--device-id-strategy",
                                   GetParam().id_strategy,
                                   "--cdi-spec-dir",
                                   dir_.Join("cdi"),
                                   "--cdi-vendor",
                                   "example.org",
                                   "--nvidia-cdi-hook-path",
                                   ""};
  for (const std::string& a : Roots()) args.push_back(a);
  Subprocess agent(args, FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  ASSERT_TRUE(sim.WaitForRegistrations(3)) << agent.Stderr();
  const std::string spec_path = dir_.Join("cdi/example.org-gpu.json");
  ASSERT_TRUE(Exists(spec_path)) << agent.Stderr();
  const std::set<std::string> names = DeviceNames(ReadFile(spec_path));
  // Three MIG devices on GPU 0 and the whole GPU 1, by UUID and index, and "all".
  EXPECT_EQ(names.size(), 9u);
  size_t checked = 0;
  for (const char* resource :
       {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"}) {
    ASSERT_TRUE(sim.WaitForDevices(resource, [](const auto& d) { return !d.empty(); }));
    for (const auto& dev : sim.Devices(resource)) {
      v1beta1::AllocateRequest req;
      req.add_container_requests()->add_devices_ids(dev.id());
      v1beta1::AllocateResponse resp;
      grpc::Status s = sim.Allocate(resource, req, &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      const auto& c = resp.container_responses(0);
      ASSERT_EQ(c.cdi_devices_size(), 1);
      const std::string name = c.cdi_devices(0).name();
      ASSERT_TRUE(name.starts_with("example.org/gpu=")) << name;
      EXPECT_EQ(names.count(name.substr(name.find('=') + 1)), 1u) << name << " not in the spec";
      ASSERT_EQ(c.annotations_size(), 1);
      EXPECT_EQ(c.annotations().begin()->second, name);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4u);
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
  EXPECT_FALSE(Exists(spec_path));
  EXPECT_TRUE(Exists(dir_.Join("cdi/someone-else.json")));  // not ours: left alone
}

INSTANTIATE_TEST_SUITE_P(All, CdiPluginTest,
                         ::testing::Values(StrategyCase{"Uuid", "uuid"},
                                           StrategyCase{"Index", "index"}),
                         [](const ::testing::TestParamInfo<StrategyCase>& p) {
                           return p.param.name;
                         });

TEST_F(CdiTest, PluginModeStopsAtStartWhenTheSpecCannotBeWritten) {
  KubeletSimulator sim(dir_.path());
  ASSERT_TRUE(sim.Start());
  const std::string not_a_dir = dir_.Write("cdi-file", "a file where the folder should be");
  std::vector<std::string> args = {
      "run",    "--kubelet-socket",       sim.socket(), "--mig-strategy",
      "mixed",  "--device-list-strategy", "cdi-cri",    "--cdi-spec-dir",
      not_a_dir};
  for (const std::string& a : Roots()) args.push_back(a);
  RunResult r = RunAgent(args, FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cdi.specDir: \\\"" + not_a_dir + "\\\" is not a folder"), std::string::npos)
      << r.err;
  EXPECT_EQ(sim.registrations(), 0);
  EXPECT_EQ(ReadFile(not_a_dir), "a file where the folder should be");
}

TEST_F(CdiTest, ReloadRewritesTheSpecUnderTheNewKindAndRemovesTheOld) {
  KubeletSimulator sim(dir_.path());
  ASSERT_TRUE(sim.Start());
  const std::string config = dir_.Write("config.yaml", "version: v1\ncdi:\n  vendor: a.example\n");
  std::vector<std::string> args = {BinaryPath(),
                                   "run",
                                   "--config",
                                   config,
                                   "--kubelet-socket",
                                   sim.socket(),
                                   "--device-list-strategy",
                                   "cdi-cri",
                                   "--cdi-spec-dir",
                                   dir_.Join("cdi"),
                                   "--mig-strategy",
                                   "mixed"};
  for (const std::string& a : Roots()) args.push_back(a);
  Subprocess agent(args, FakeNvmlEnv(FixturePath("2-gpu-mig.yaml")));
  ASSERT_TRUE(sim.WaitForRegistrations(3)) << agent.Stderr();
  ASSERT_TRUE(Exists(dir_.Join("cdi/a.example-gpu.json")));
  dir_.Write("config.yaml", "version: v1\ncdi:\n  vendor: b.example\n");
  agent.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] {
    return Exists(dir_.Join("cdi/b.example-gpu.json")) &&
           !Exists(dir_.Join("cdi/a.example-gpu.json"));
  })) << agent.Stderr();
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
  EXPECT_FALSE(Exists(dir_.Join("cdi/b.example-gpu.json")));
}

}  // namespace
}  // namespace gpu_agent::testing
