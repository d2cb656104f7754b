// ResourceSlices built from DRA devices: the split at 128 devices (64 with
// a taint), v1beta1's `basic` wrapper, and unhealthy devices' taints; the
// device's versions and PCIe root. The devices themselves, named and
// attributed from the device model: tests/agent/plan/device_model_test.cc.
#include "dra/resource_slice.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "base/resource_name.h"
#include "base/strings.h"
#include "dra/dra_device.h"
#include "support/test_support.h"

namespace gpu_agent::dra {
namespace {

std::string Text(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return buf.GetString();
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  EXPECT_FALSE(d.HasParseError()) << json;
  return d;
}

TEST(DraDeviceTest, SemanticVersionRefusesWhatIsNotOne) {
  EXPECT_EQ(SemanticVersion("550.54.15"), "550.54.15");
  EXPECT_EQ(SemanticVersion("12"), "12.0.0");
  EXPECT_EQ(SemanticVersion(""), "");
  EXPECT_EQ(SemanticVersion("1.2.3.4"), "");
  EXPECT_EQ(SemanticVersion("12.x"), "");
}

TEST(DraDeviceTest, PcieRootIsReadFromTheSysfsDeviceLink) {
  gpu_agent::testing::TempDir dir;
  dir.Write("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/class", "0x030200\n");
  dir.Write("bus/pci/devices/.keep", "");
  ASSERT_EQ(::symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
                      dir.Join("bus/pci/devices/0000:3b:00.0").c_str()),
            0);
  EXPECT_EQ(ReadPcieRoot(dir.path(), "00000000:3B:00.0"), "pci0000:3a");
  EXPECT_EQ(ReadPcieRoot(dir.path(), "00000000:3C:00.0"), "");
}

SliceInput Input(size_t devices) {
  SliceInput in;
  in.driver = "gpu.gpu-agent.github.io";
  in.node = "node-a";
  in.node_uid = "uid-node-a";
  in.pool_generation = 7;
  for (size_t i = 0; i < devices; ++i) {
    DraDevice d;
    d.name = StrCat("gpu-", i);
    d.attributes["minor"] = AttributeValue::Int(static_cast<int64_t>(i));
    d.capacity["memory"] = "80Gi";
    in.devices.push_back(d);
  }
  return in;
}

TEST(ResourceSliceTest, OneSliceCarriesThePoolDriverNodeAndOwner) {
  std::vector<std::string> slices = BuildResourceSlices(Input(2));
  ASSERT_EQ(slices.size(), 1u);
  rapidjson::Document d = Parse(slices[0]);
  EXPECT_STREQ(d["apiVersion"].GetString(), "resource.k8s.io/v1");
  EXPECT_STREQ(d["kind"].GetString(), "ResourceSlice");
  EXPECT_STREQ(d["metadata"]["name"].GetString(), "node-a-gpu.gpu-agent.github.io-0");
  EXPECT_STREQ(d["metadata"]["ownerReferences"][0]["kind"].GetString(), "Node");
  EXPECT_STREQ(d["metadata"]["ownerReferences"][0]["uid"].GetString(), "uid-node-a");
  const auto& spec = d["spec"];
  EXPECT_STREQ(spec["driver"].GetString(), "gpu.gpu-agent.github.io");
  EXPECT_STREQ(spec["nodeName"].GetString(), "node-a");
  EXPECT_STREQ(spec["pool"]["name"].GetString(), "node-a");
  EXPECT_EQ(spec["pool"]["generation"].GetInt64(), 7);
  EXPECT_EQ(spec["pool"]["resourceSliceCount"].GetInt(), 1);
  ASSERT_EQ(spec["devices"].Size(), 2u);
  EXPECT_STREQ(spec["devices"][1]["name"].GetString(), "gpu-1");
  EXPECT_EQ(spec["devices"][1]["attributes"]["minor"]["int"].GetInt(), 1);
  EXPECT_STREQ(spec["devices"][1]["capacity"]["memory"]["value"].GetString(), "80Gi");
  EXPECT_FALSE(spec["devices"][1].HasMember("basic"));
}

TEST(ResourceSliceTest, A129thDeviceStartsASecondSliceAndBothCountTwo) {
  std::vector<std::string> slices = BuildResourceSlices(Input(129));
  ASSERT_EQ(slices.size(), 2u);
  rapidjson::Document first = Parse(slices[0]);
  rapidjson::Document second = Parse(slices[1]);
  EXPECT_EQ(first["spec"]["devices"].Size(), 128u);
  EXPECT_EQ(second["spec"]["devices"].Size(), 1u);
  EXPECT_STREQ(second["spec"]["devices"][0]["name"].GetString(), "gpu-128");
  EXPECT_EQ(first["spec"]["pool"]["resourceSliceCount"].GetInt(), 2);
  EXPECT_EQ(second["spec"]["pool"]["resourceSliceCount"].GetInt(), 2);
  EXPECT_STREQ(second["metadata"]["name"].GetString(), "node-a-gpu.gpu-agent.github.io-1");
  // 128 exactly is still one slice.
  EXPECT_EQ(BuildResourceSlices(Input(128)).size(), 1u);
}

TEST(ResourceSliceTest, NoDevicesIsOneEmptySliceSoThePoolIsKnown) {
  std::vector<std::string> slices = BuildResourceSlices(Input(0));
  ASSERT_EQ(slices.size(), 1u);
  rapidjson::Document d = Parse(slices[0]);
  EXPECT_EQ(d["spec"]["devices"].Size(), 0u);
  EXPECT_EQ(d["spec"]["pool"]["resourceSliceCount"].GetInt(), 1);
}

TEST(ResourceSliceTest, V1beta1WrapsEachDevicesFieldsInBasic) {
  SliceInput in = Input(1);
  in.api_version = "v1beta1";
  in.node_uid.clear();
  rapidjson::Document d = Parse(BuildResourceSlices(in).at(0));
  EXPECT_STREQ(d["apiVersion"].GetString(), "resource.k8s.io/v1beta1");
  EXPECT_FALSE(d["metadata"].HasMember("ownerReferences"));
  const auto& dev = d["spec"]["devices"][0];
  EXPECT_STREQ(dev["name"].GetString(), "gpu-0");
  EXPECT_FALSE(dev.HasMember("attributes"));
  EXPECT_EQ(dev["basic"]["attributes"]["minor"]["int"].GetInt(), 0);
  EXPECT_STREQ(dev["basic"]["capacity"]["memory"]["value"].GetString(), "80Gi");
}

TEST(ResourceSliceTest, ATaintedDeviceCarriesANoScheduleTaintWhereEachVersionHoldsIt) {
  for (const char* version : {"v1", "v1beta2", "v1beta1"}) {
    SCOPED_TRACE(version);
    SliceInput in = Input(2);
    in.api_version = version;
    in.tainted = {
        {"gpu-1", {"gpu.gpu-agent.github.io/unhealthy", "XID-79", TaintEffect::kNoSchedule}}};
    rapidjson::Document d = Parse(BuildResourceSlices(in).at(0));
    const auto& devices = d["spec"]["devices"];
    ASSERT_EQ(devices.Size(), 2u);
    const bool basic = std::string(version) == "v1beta1";
    const auto& healthy = basic ? devices[0]["basic"] : devices[0];
    const auto& tainted = basic ? devices[1]["basic"] : devices[1];
    EXPECT_FALSE(healthy.HasMember("taints"));
    EXPECT_FALSE(devices[1].HasMember(basic ? "taints" : "basic"));
    ASSERT_TRUE(tainted.HasMember("taints"));
    ASSERT_EQ(tainted["taints"].Size(), 1u);
    const auto& t = tainted["taints"][0];
    EXPECT_STREQ(t["key"].GetString(), "gpu.gpu-agent.github.io/unhealthy");
    EXPECT_STREQ(t["value"].GetString(), "XID-79");
    EXPECT_STREQ(t["effect"].GetString(), "NoSchedule");
    EXPECT_FALSE(t.HasMember("timeAdded"));  // the server's to set
  }
}

TEST(ResourceSliceTest, ASliceWithATaintHoldsAt64Devices) {
  SliceInput in = Input(65);
  in.tainted = {
      {"gpu-0", {"gpu.gpu-agent.github.io/unhealthy", "XID-48", TaintEffect::kNoSchedule}}};
  std::vector<std::string> slices = BuildResourceSlices(in);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(Parse(slices[0])["spec"]["devices"].Size(), 64u);
  EXPECT_EQ(Parse(slices[1])["spec"]["devices"].Size(), 1u);
}

TEST(ResourceSliceTest, ATaintValueIsALabelValue) {
  EXPECT_EQ(TaintValue("XID 79"), "XID-79");
  EXPECT_EQ(TaintValue("unhealthy at start"), "unhealthy-at-start");
  EXPECT_EQ(TaintValue(" (temperature: 95 C) "), "temperature--95-C");
  EXPECT_EQ(TaintValue("!!"), "Unhealthy");
  EXPECT_EQ(TaintValue(""), "Unhealthy");
  EXPECT_EQ(TaintValue(std::string(70, 'a') + "-b").size(), 63u);
}

// A node name may have 253 characters, the most an object name may: the
// slices' names are cut to fit, stay valid, stay the same for the same node
// and differ for nodes that share the part kept.
TEST(ResourceSliceTest, SliceNamesFitAndStayDistinctForTheLongestNodeNames) {
  const std::string driver = "gpu.gpu-agent.github.io";
  EXPECT_EQ(SliceName("node-a", driver, 3), "node-a-gpu.gpu-agent.github.io-3");
  const std::string base =
      std::string(63, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') + ".";
  const std::string one = base + std::string(61, 'd');
  const std::string two = base + std::string(60, 'd') + "e";
  ASSERT_EQ(one.size(), 253u);
  ASSERT_TRUE(ValidateNodeName(one).ok());
  for (size_t n : {size_t{0}, size_t{12}}) {
    const std::string a = SliceName(one, driver, n);
    EXPECT_LE(a.size(), 253u) << a;
    EXPECT_TRUE(ValidateDnsSubdomain("slice name", a).ok()) << a;
    EXPECT_EQ(a, SliceName(one, driver, n));
    EXPECT_NE(a, SliceName(two, driver, n));
    EXPECT_TRUE(a.ends_with("-" + driver + "-" + std::to_string(n))) << a;
  }
  // The cut that lands after a dot or a dash is taken back to a letter.
  const std::string dotted = base + std::string(25, 'd') + "." + std::string(35, 'e');
  ASSERT_EQ(dotted.size(), 253u);
  EXPECT_EQ(SliceName(dotted, driver, 0).substr(192, 26), std::string(25, 'd') + "-");
  EXPECT_TRUE(ValidateDnsSubdomain("slice name", SliceName(dotted, driver, 0)).ok())
      << SliceName(dotted, driver, 0);
}

// A time-sliced GPU (4 replicas) where the server serves consumable
// capacity: published once, allowing multiple allocations, with a "shares"
// capacity each claim takes 1 of by default (at most 4, or 1 under
// failRequestsGreaterThanOne) and its memory a quarter a claim at least;
// where it does not, whole, as before. v1beta1 holds the fields in basic.
TEST(ResourceSliceTest, ASharedDeviceIsPublishedOnceWithConsumableShares) {
  nvml::Inventory inventory;
  nvml::GpuRecord gpu;
  gpu.uuid = "GPU-0";
  gpu.memory_mib = 81920;
  SliceInput in = Input(0);
  in.devices.push_back(BuildDevice(inventory, gpu, nullptr, "gpu-0", "", "", 4, 4));
  in.devices.push_back(BuildDevice(inventory, gpu, nullptr, "gpu-1", "", "", 4, 1));
  in.devices.push_back(BuildDevice(inventory, gpu, nullptr, "gpu-2", "", ""));
  in.consumable_capacity = true;
  for (const char* version : {"v1", "v1beta1"}) {
    SCOPED_TRACE(version);
    in.api_version = version;
    rapidjson::Document d = Parse(BuildResourceSlices(in)[0]);
    auto fields = [&](size_t i) -> const rapidjson::Value& {
      const rapidjson::Value& dev = d["spec"]["devices"][static_cast<rapidjson::SizeType>(i)];
      return in.api_version == "v1beta1" ? dev["basic"] : dev;
    };
    const rapidjson::Value& shared = fields(0);
    EXPECT_TRUE(shared["allowMultipleAllocations"].GetBool());
    EXPECT_EQ(Text(shared["capacity"]),
              R"({"memory":{"value":"80Gi","requestPolicy":{"default":"20Gi","validRange":)"
              R"({"min":"20Gi","max":"80Gi"}}},"shares":{"value":"4","requestPolicy":{"default":)"
              R"("1","validRange":{"min":"1","max":"4","step":"1"}}}})");
    EXPECT_STREQ(fields(1)["capacity"]["shares"]["requestPolicy"]["validRange"]["max"].GetString(),
                 "1");
    EXPECT_FALSE(fields(2).HasMember("allowMultipleAllocations"));
    EXPECT_EQ(Text(fields(2)["capacity"]), R"({"memory":{"value":"80Gi"}})");
  }
  in.api_version = "v1";
  in.consumable_capacity = false;
  rapidjson::Document whole = Parse(BuildResourceSlices(in)[0]);
  for (const auto& dev : whole["spec"]["devices"].GetArray()) {
    EXPECT_FALSE(dev.HasMember("allowMultipleAllocations"));
    EXPECT_EQ(Text(dev["capacity"]), R"({"memory":{"value":"80Gi"}})");
  }
}

TEST(MebibyteQuantityTest, IsTheApiServersCanonicalForm) {
  EXPECT_EQ(MebibyteQuantity(81920), "80Gi");
  EXPECT_EQ(MebibyteQuantity(32768), "32Gi");
  EXPECT_EQ(MebibyteQuantity(9856), "9856Mi");
  EXPECT_EQ(MebibyteQuantity(1536), "1536Mi");
  EXPECT_EQ(MebibyteQuantity(1024u * 1024), "1Ti");
  EXPECT_EQ(MebibyteQuantity(1), "1Mi");
  EXPECT_EQ(MebibyteQuantity(0), "0");
}

}  // namespace
}  // namespace gpu_agent::dra
