// The CDI spec model: name rules, the smallest cdiVersion, the JSON and
// YAML forms, and the atomic file write the spec goes out with.
#include "cdi/spec.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "base/file_util.h"
#include "base/strings.h"
#include "support/test_support.h"

namespace gpu_agent::cdi {
namespace {

struct NameCase {
  std::string name;
  std::string error;  // empty: valid
};

TEST(CdiNames, VendorClassAndDeviceRules) {
  for (const NameCase& c : std::vector<NameCase>{
           {"gpu-agent.github.io", ""},
           {"nvidia.com", ""},
           {"a", ""},
           {"", "invalid CDI vendor \"\": it is empty"},
           {"1vendor", "invalid CDI vendor \"1vendor\": it must start with a letter"},
           {"vendor.", "invalid CDI vendor \"vendor.\": it must end with a letter or digit"},
           {"ven/dor",
            "invalid CDI vendor \"ven/dor\": character '/' at position 4 is not "
            "allowed (only letters, digits and '_', '-', '.')"},
       }) {
    absl::Status s = ValidateVendor(c.name);
    EXPECT_EQ(std::string(s.message()), c.error) << c.name;
  }
  EXPECT_TRUE(ValidateClass("gpu").ok());
  EXPECT_EQ(std::string(ValidateClass("gpu=x").message()),
            "invalid CDI class \"gpu=x\": character '=' at position 4 is not allowed (only "
            "letters, digits and '_', '-', '.')");
  EXPECT_EQ(std::string(ValidateClass(std::string(64, 'g')).message()),
            StrCat("invalid CDI class \"", std::string(64, 'g'), "\": longer than 63 characters"));
  for (const char* ok : {"0", "7:1", "GPU-98c751c8-5401-57c6-bc37-497291358157",
                         "MIG-830ac273-9aa0-574f-9f5c-22f3462d8634", "all"}) {
    EXPECT_TRUE(ValidateDeviceName(ok).ok()) << ok;
  }
  EXPECT_EQ(std::string(ValidateDeviceName("0:").message()),
            "invalid CDI device name \"0:\": it must end with a letter or digit");
  EXPECT_EQ(std::string(ValidateDeviceName(":0").message()),
            "invalid CDI device name \":0\": it must start with a letter or digit");
  EXPECT_EQ(std::string(ValidateDeviceName("a b").message()),
            "invalid CDI device name \"a b\": character ' ' at position 2 is not allowed (only "
            "letters, digits and '_', '-', '.', ':')");
}

Spec Small() {
  Spec s;
  s.kind = "example.com/gpu";
  s.devices.push_back(Device{"gpu0", {{}, {{"/dev/nvidia0", ""}}, {}, {}}});
  s.edits.env = {"NVIDIA_VISIBLE_DEVICES=void"};
  s.edits.mounts = {{"/host/lib/libcuda.so.1", "/usr/lib/libcuda.so.1", {"ro", "bind"}}};
  s.edits.hooks = {{"createContainer", "/usr/bin/nvidia-ctk", {"nvidia-ctk", "hook", "x"}}};
  return s;
}

TEST(CdiVersion, TheSmallestThatHoldsWhatIsUsed) {
  Spec s = Small();
  EXPECT_EQ(MinimumVersion(s), "0.3.0");
  s.devices.push_back(Device{"0", {}});  // a name starting with a digit
  EXPECT_EQ(MinimumVersion(s), "0.5.0");
  s = Small();
  s.devices[0].edits.device_nodes[0].host_path = "/root/dev/nvidia0";
  EXPECT_EQ(MinimumVersion(s), "0.5.0");
  s = Small();
  s.edits.device_nodes = {{"/dev/nvidiactl", "/root/dev/nvidiactl"}};
  EXPECT_EQ(MinimumVersion(s), "0.5.0");
  s.kind = "example.com/gpu.shared";  // a '.' in the class
  EXPECT_EQ(MinimumVersion(s), "0.6.0");
}

TEST(CdiRender, ExactJson) {
  EXPECT_EQ(RenderJson(Small()), R"({
  "cdiVersion": "0.3.0",
  "kind": "example.com/gpu",
  "devices": [
    {
      "name": "gpu0",
      "containerEdits": {
        "deviceNodes": [
          {
            "path": "/dev/nvidia0"
          }
        ]
      }
    }
  ],
  "containerEdits": {
    "env": [
      "NVIDIA_VISIBLE_DEVICES=void"
    ],
    "mounts": [
      {
        "hostPath": "/host/lib/libcuda.so.1",
        "containerPath": "/usr/lib/libcuda.so.1",
        "options": [
          "ro",
          "bind"
        ]
      }
    ],
    "hooks": [
      {
        "hookName": "createContainer",
        "path": "/usr/bin/nvidia-ctk",
        "args": [
          "nvidia-ctk",
          "hook",
          "x"
        ]
      }
    ]
  }
}
)");
}

TEST(CdiRender, YamlQuotesEveryStringSoIndexNamesStayStrings) {
  Spec s = Small();
  s.devices.push_back(Device{"0", {}});
  const std::string yaml = RenderYaml(s);
  EXPECT_NE(yaml.find("name: \"0\""), std::string::npos) << yaml;
  // The same document as the JSON form.
  YAML::Node y = YAML::Load(yaml);
  rapidjson::Document j;
  j.Parse(RenderJson(s).c_str());
  ASSERT_FALSE(j.HasParseError());
  EXPECT_EQ(y["cdiVersion"].as<std::string>(), j["cdiVersion"].GetString());
  EXPECT_EQ(y["kind"].as<std::string>(), "example.com/gpu");
  ASSERT_EQ(y["devices"].size(), 2u);
  EXPECT_EQ(y["devices"][1]["name"].as<std::string>(), "0");
  EXPECT_TRUE(y["devices"][1]["containerEdits"].IsMap());
  EXPECT_EQ(y["containerEdits"]["mounts"][0]["options"][1].as<std::string>(), "bind");
  EXPECT_EQ(y["containerEdits"]["hooks"][0]["args"].size(), 3u);
}

TEST(CdiSpecCheck, BadSpecsAreNamed) {
  Spec s = Small();
  s.devices.push_back(s.devices[0]);
  EXPECT_EQ(std::string(ValidateSpec(s).message()),
            "CDI device example.com/gpu=gpu0 is listed twice");
  s = Small();
  s.devices[0].edits.device_nodes[0].path = "dev/nvidia0";
  EXPECT_EQ(std::string(ValidateSpec(s).message()),
            "device gpu0: device node path \"dev/nvidia0\" is not an absolute path");
  s = Small();
  s.edits.hooks[0].path = "nvidia-ctk";
  EXPECT_EQ(std::string(ValidateSpec(s).message()),
            "spec containerEdits: hook path \"nvidia-ctk\" is not an absolute path");
  s = Small();
  s.devices.clear();
  EXPECT_EQ(std::string(ValidateSpec(s).message()), "CDI spec for example.com/gpu has no device");
  s = Small();
  s.kind = "example.com";
  EXPECT_EQ(std::string(ValidateSpec(s).message()),
            "CDI kind \"example.com\" is not <vendor>/<class>");
  EXPECT_TRUE(ValidateSpec(Small()).ok());
}

TEST(CdiSpecFileName, VendorDashClass) {
  EXPECT_EQ(SpecFileName("gpu-agent.github.io/gpu", "json"), "gpu-agent.github.io-gpu.json");
}

TEST(AtomicWrite, ReplacesWholeWithMode0644AndLeavesNoTemporaryFile) {
  testing::TempDir dir;
  const std::string path = dir.Join("spec.json");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(testing::ReadFile(path), "second");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1u);
  absl::Status s = WriteFileAtomically(dir.Join("missing/spec.json"), "x");
  EXPECT_EQ(std::string(s.message()),
            StrCat("cannot write ", dir.Join("missing/spec.json"),
                   ": creating a temporary file in its folder: No such file or directory"));
}

}  // namespace
}  // namespace gpu_agent::cdi
