// `gpu-agent devices`' report (device_report.h) for hand-made inventories:
// the table's rows, MIG lines and interconnect matrix; the JSON and YAML
// read back by a parser, hostile names included; and a selection of GPUs
// whose indexes are not their positions.
#include "agent/cli/device_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "support/gpu_records.h"

namespace gpu_agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// MixedNode (GPU 0 MIG with three devices, GPU 1 whole), NVLinked, on a
// driver, GPU 1 on NUMA node 1.
nvml::Inventory Node() {
  nvml::Inventory inv = testing::MixedNode();
  inv.driver_version = "550.54.15";
  inv.cuda_driver_version = "12.4";
  inv.gpus[0].pci_bus_id = "00000000:07:00.0";
  inv.gpus[1].pci_bus_id = "00000000:0F:00.0";
  inv.gpus[1].numa_node = 1;
  inv.gpus[0].cc_major = inv.gpus[1].cc_major = 8;
  inv.links[0][1].nvlinks = inv.links[1][0].nvlinks = 12;
  return inv;
}

rapidjson::Document Json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

TEST(DeviceReportTest, TheTableHasARowPerGpuItsMigDevicesAndTheLinks) {
  const std::string t = DevicesAsTable(Node());
  EXPECT_EQ(t.substr(0, t.find('\n')), "Driver 550.54.15, CUDA 12.4, 2 GPU(s)");
  EXPECT_THAT(t, HasSubstr("INDEX"));
  // GPU 0: MIG on with its three devices; GPU 1: off, NUMA node 1.
  EXPECT_THAT(t, HasSubstr("on (3)"));
  EXPECT_THAT(t, HasSubstr("GPU 0 MIG 0: MIG-a (2g.20gb, 19968 MiB, GI 1 CI 0)"));
  EXPECT_THAT(t, HasSubstr("GPU 0 MIG 2: MIG-c (1g.10gb, 9856 MiB, GI 3 CI 0)"));
  EXPECT_THAT(t, HasSubstr("00000000:0F:00.0  1"));
  EXPECT_THAT(t, HasSubstr("off"));
  // The matrix: NV12 both ways, X on the diagonal.
  EXPECT_THAT(t, HasSubstr("GPU0  X\tNV12\t\n"));
  EXPECT_THAT(t, HasSubstr("GPU1  NV12\tX\t\n"));
}

TEST(DeviceReportTest, NoGpusIsOneLineAndEmptyLists) {
  nvml::Inventory none;
  EXPECT_EQ(DevicesAsTable(none), "Driver ?, CUDA ?, 0 GPU(s)\n");
  rapidjson::Document d = Json(DevicesAsJson(none));
  ASSERT_TRUE(d.IsArray());
  EXPECT_EQ(d.Size(), 0u);
  const YAML::Node y = YAML::Load(DevicesAsYaml(none));
  EXPECT_EQ(y["gpus"].size(), 0u);
}

TEST(DeviceReportTest, JsonHasEachGpuItsMigDevicesAndLinks) {
  rapidjson::Document d = Json(DevicesAsJson(Node()));
  ASSERT_TRUE(d.IsArray());
  ASSERT_EQ(d.Size(), 2u);
  const auto& g0 = d[0];
  EXPECT_STREQ(g0["uuid"].GetString(), "GPU-0aaa");
  EXPECT_EQ(g0["memoryMiB"].GetUint64(), 81920u);
  EXPECT_STREQ(g0["pciDeviceId"].GetString(), "0x20b210de");
  EXPECT_STREQ(g0["computeCapability"].GetString(), "8.0");
  EXPECT_STREQ(g0["driverVersion"].GetString(), "550.54.15");
  EXPECT_TRUE(g0["migEnabled"].GetBool());
  ASSERT_EQ(g0["migDevices"].Size(), 3u);
  EXPECT_STREQ(g0["migDevices"][1]["uuid"].GetString(), "MIG-b");
  EXPECT_EQ(g0["migDevices"][1]["gpuInstanceId"].GetUint(), 2u);
  EXPECT_STREQ(g0["migDevices"][1]["profile"].GetString(), "1g.10gb");
  EXPECT_STREQ(g0["links"]["1"].GetString(), "NV12");
  EXPECT_FALSE(g0["links"].HasMember("0"));
  EXPECT_FALSE(g0.HasMember("error"));
  EXPECT_EQ(d[1]["numaNode"].GetInt(), 1);
  EXPECT_STREQ(d[1]["links"]["0"].GetString(), "NV12");
}

TEST(DeviceReportTest, AGpuThatCouldNotBeReadSaysWhy) {
  nvml::Inventory inv = Node();
  inv.gpus[1].error = "nvmlDeviceGetMemoryInfo: Insufficient Permissions";
  inv.gpus[1].mig_mode_error = "Unknown Error";
  EXPECT_THAT(DevicesAsTable(inv),
              HasSubstr("GPU 1 error: nvmlDeviceGetMemoryInfo: Insufficient Permissions\n"));
  EXPECT_THAT(DevicesAsTable(inv), HasSubstr("unknown"));
  rapidjson::Document d = Json(DevicesAsJson(inv));
  EXPECT_STREQ(d[1]["error"].GetString(), "nvmlDeviceGetMemoryInfo: Insufficient Permissions");
  EXPECT_EQ(YAML::Load(DevicesAsYaml(inv))["gpus"][1]["error"].as<std::string>(),
            "nvmlDeviceGetMemoryInfo: Insufficient Permissions");
}

// NVML's strings are the driver's: quotes, backslashes, YAML's and JSON's
// own syntax come through as text.
TEST(DeviceReportTest, HostileNamesRoundTripThroughJsonAndYaml) {
  nvml::Inventory inv = Node();
  const std::string name = "NVIDIA \"A100\" \\ #1: {x: [y]} - &a *b";
  inv.gpus[1].name = name;
  inv.gpus[0].mig_devices[0].uuid = "MIG-\"q\": 'p'";
  rapidjson::Document d = Json(DevicesAsJson(inv));
  EXPECT_EQ(d[1]["name"].GetString(), name);
  EXPECT_STREQ(d[0]["migDevices"][0]["uuid"].GetString(), "MIG-\"q\": 'p'");
  const YAML::Node y = YAML::Load(DevicesAsYaml(inv));
  EXPECT_EQ(y["driverVersion"].as<std::string>(), "550.54.15");
  EXPECT_EQ(y["gpus"][1]["name"].as<std::string>(), name);
  EXPECT_EQ(y["gpus"][0]["migDevices"][0]["uuid"].as<std::string>(), "MIG-\"q\": 'p'");
  EXPECT_EQ(y["gpus"][0]["migDevices"][2]["profile"].as<std::string>(), "1g.10gb");
  EXPECT_FALSE(y["gpus"][1]["migDevices"]);  // none on a whole GPU
}

// `devices` with devices.* shows the chosen GPUs with their own indexes and
// the links between them (devices_command.cc narrows the inventory so).
TEST(DeviceReportTest, ASelectionShowsTheChosenGpusByTheirIndexes) {
  nvml::Inventory inv;
  inv.gpus = {testing::Gpu(1), testing::Gpu(3)};
  inv.links.assign(2, std::vector<nvml::GpuLink>(2));
  inv.links[0][1].nvlinks = inv.links[1][0].nvlinks = 4;
  rapidjson::Document d = Json(DevicesAsJson(inv));
  ASSERT_EQ(d.Size(), 2u);
  EXPECT_EQ(d[0]["index"].GetUint(), 1u);
  ASSERT_TRUE(d[0]["links"].HasMember("3")) << DevicesAsJson(inv);
  EXPECT_STREQ(d[0]["links"]["3"].GetString(), "NV4");
  EXPECT_EQ(d[0]["links"].MemberCount(), 1u);
  ASSERT_TRUE(d[1]["links"].HasMember("1")) << DevicesAsJson(inv);
  EXPECT_STREQ(d[1]["links"]["1"].GetString(), "NV4");
  const std::string t = DevicesAsTable(inv);
  EXPECT_THAT(t, HasSubstr("GPU1\tGPU3\t\n"));
  EXPECT_THAT(t, HasSubstr("GPU3  NV4\tX\t\n"));
  EXPECT_THAT(t, Not(HasSubstr("GPU0")));
}

// An inventory without the link matrix (none read) prints no link it does
// not have, rather than reading past the matrix.
TEST(DeviceReportTest, AMissingLinkMatrixPrintsUnknownLinks) {
  nvml::Inventory inv = testing::PlainNode(2);
  ASSERT_TRUE(inv.links.empty());
  EXPECT_THAT(DevicesAsTable(inv), HasSubstr("GPU0  X\t?\t\n"));
  rapidjson::Document d = Json(DevicesAsJson(inv));
  EXPECT_EQ(d[0]["links"].MemberCount(), 0u);
}

}  // namespace
}  // namespace gpu_agent
