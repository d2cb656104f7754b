// The kubelet's DRA protos as this agent compiles them, field by field, against
// the numbers, types and packages of the kubelet's own definitions
// (kubernetes/kubernetes, staging/src/k8s.io/kubelet/pkg/apis/:
// pluginregistration/v1/api.proto, dra/v1/api.proto, dra/v1beta1/api.proto,
// dra-health/{v1,v1beta1,v1alpha1}/api.proto). A number or type that drifts is a message
// the kubelet reads as something else, with no error on either side.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dra/dra_v1.pb.h"
#include "dra/dra_v1beta1.pb.h"
#include "dra/health_v1.pb.h"
#include "dra/health_v1alpha1.pb.h"
#include "dra/health_v1beta1.pb.h"
#include "dra/registration.pb.h"
#include "podresources/api.pb.h"

namespace gpu_agent::dra {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

struct Field {
  std::string message;  // full name
  const char* field;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
};

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kMessage = FieldDescriptor::TYPE_MESSAGE;

std::vector<Field> DraFields(const std::string& p) {
  auto n = [&](const char* m) { return p + "." + m; };
  return {
      {n("Claim"), "namespace", 1, kString, false},
      {n("Claim"), "uid", 2, kString, false},
      {n("Claim"), "name", 3, kString, false},
      {n("NodePrepareResourcesRequest"), "claims", 1, kMessage, true},
      {n("NodePrepareResourcesResponse"), "claims", 1, kMessage, true},
      {n("NodePrepareResourceResponse"), "devices", 1, kMessage, true},
      {n("NodePrepareResourceResponse"), "error", 2, kString, false},
      {n("Device"), "request_names", 1, kString, true},
      {n("Device"), "pool_name", 2, kString, false},
      {n("Device"), "device_name", 3, kString, false},
      {n("Device"), "cdi_device_ids", 4, kString, true},
      {n("NodeUnprepareResourcesRequest"), "claims", 1, kMessage, true},
      {n("NodeUnprepareResourcesResponse"), "claims", 1, kMessage, true},
      {n("NodeUnprepareResourceResponse"), "error", 1, kString, false},
  };
}

// The health services' own files hold no message to name: their
// descriptors are linked in, and so in the generated pool, by reference.
const void* volatile kLinkedHealthFiles[] = {&descriptor_table_dra_2fhealth_5fv1_2eproto,
                                             &descriptor_table_dra_2fhealth_5fv1beta1_2eproto};

// The health service's three packages; v1alpha1's messages serve all three
// (the kubelet's v1 and v1beta1 messages have the same names, numbers and
// types as its v1alpha1 ones, and a message's package never reaches the
// wire).
constexpr const char* kHealthPackages[] = {"v1", "v1beta1", "v1alpha1"};

std::vector<Field> HealthFields(const std::string& p) {
  auto n = [&](const char* m) { return p + "." + m; };
  return {
      {n("DeviceIdentifier"), "pool_name", 1, kString, false},
      {n("DeviceIdentifier"), "device_name", 2, kString, false},
      {n("DeviceHealth"), "device", 1, kMessage, false},
      {n("DeviceHealth"), "health", 2, FieldDescriptor::TYPE_ENUM, false},
      {n("DeviceHealth"), "last_updated_time", 3, FieldDescriptor::TYPE_INT64, false},
      {n("DeviceHealth"), "health_check_timeout_seconds", 4, FieldDescriptor::TYPE_INT64, false},
      {n("DeviceHealth"), "message", 5, kString, false},
      {n("NodeWatchResourcesResponse"), "devices", 1, kMessage, true},
  };
}

// The kubelet's PodResources v1 (podresources/v1/api.proto), which the agent
// reads while a node moves between the device plugin and DRA.
std::vector<Field> PodResourcesFields() {
  constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
  return {
      {"v1.ListPodResourcesResponse", "pod_resources", 1, kMessage, true},
      {"v1.AllocatableResourcesResponse", "devices", 1, kMessage, true},
      {"v1.AllocatableResourcesResponse", "cpu_ids", 2, kInt64, true},
      {"v1.AllocatableResourcesResponse", "memory", 3, kMessage, true},
      {"v1.GetPodResourcesRequest", "pod_name", 1, kString, false},
      {"v1.GetPodResourcesRequest", "pod_namespace", 2, kString, false},
      {"v1.GetPodResourcesResponse", "pod_resources", 1, kMessage, false},
      {"v1.PodResources", "name", 1, kString, false},
      {"v1.PodResources", "namespace", 2, kString, false},
      {"v1.PodResources", "containers", 3, kMessage, true},
      {"v1.ContainerResources", "name", 1, kString, false},
      {"v1.ContainerResources", "devices", 2, kMessage, true},
      {"v1.ContainerResources", "cpu_ids", 3, kInt64, true},
      {"v1.ContainerResources", "memory", 4, kMessage, true},
      {"v1.ContainerResources", "dynamic_resources", 5, kMessage, true},
      {"v1.ContainerDevices", "resource_name", 1, kString, false},
      {"v1.ContainerDevices", "device_ids", 2, kString, true},
      {"v1.ContainerDevices", "topology", 3, kMessage, false},
      {"v1.ContainerMemory", "memory_type", 1, kString, false},
      {"v1.ContainerMemory", "size", 2, FieldDescriptor::TYPE_UINT64, false},
      {"v1.ContainerMemory", "topology", 3, kMessage, false},
      {"v1.TopologyInfo", "nodes", 1, kMessage, true},
      {"v1.NUMANode", "ID", 1, kInt64, false},
      {"v1.DynamicResource", "claim_name", 2, kString, false},
      {"v1.DynamicResource", "claim_namespace", 3, kString, false},
      {"v1.DynamicResource", "claim_resources", 4, kMessage, true},
      {"v1.ClaimResource", "cdi_devices", 1, kMessage, true},
      {"v1.ClaimResource", "driver_name", 2, kString, false},
      {"v1.ClaimResource", "pool_name", 3, kString, false},
      {"v1.ClaimResource", "device_name", 4, kString, false},
      {"v1.ClaimResource", "share_id", 5, kString, false},
      {"v1.CDIDevice", "name", 1, kString, false},
  };
}

std::vector<Field> AllFields() {
  std::vector<Field> out = {
      {"pluginregistration.PluginInfo", "type", 1, kString, false},
      {"pluginregistration.PluginInfo", "name", 2, kString, false},
      {"pluginregistration.PluginInfo", "endpoint", 3, kString, false},
      {"pluginregistration.PluginInfo", "supported_versions", 4, kString, true},
      {"pluginregistration.RegistrationStatus", "plugin_registered", 1, FieldDescriptor::TYPE_BOOL,
       false},
      {"pluginregistration.RegistrationStatus", "error", 2, kString, false},
  };
  for (const char* p : {"k8s.io.kubelet.pkg.apis.dra.v1", "k8s.io.kubelet.pkg.apis.dra.v1beta1"}) {
    for (const Field& f : DraFields(p)) out.push_back(f);
  }
  for (const Field& f : HealthFields("v1alpha1")) out.push_back(f);
  for (const Field& f : PodResourcesFields()) out.push_back(f);
  return out;
}

TEST(WireNumbersTest, EveryFieldHasTheKubeletsNumberAndType) {
  // Linked in: their descriptors are in the generated pool.
  (void)pluginregistration::PluginInfo::descriptor();
  (void)k8s::io::kubelet::pkg::apis::dra::v1::Claim::descriptor();
  (void)k8s::io::kubelet::pkg::apis::dra::v1beta1::Claim::descriptor();
  (void)v1alpha1::DeviceHealth::descriptor();
  (void)v1::ListPodResourcesResponse::descriptor();
  for (const Field& f : AllFields()) {
    SCOPED_TRACE(f.message + "." + f.field);
    const Descriptor* m = DescriptorPool::generated_pool()->FindMessageTypeByName(f.message);
    ASSERT_NE(m, nullptr);
    const FieldDescriptor* d = m->FindFieldByName(f.field);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->number(), f.number);
    EXPECT_EQ(d->type(), f.type);
    EXPECT_EQ(d->is_repeated(), f.repeated);
  }
}

TEST(WireNumbersTest, HealthStatesAndMethodPathsAreTheKubelets) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  const auto* health = pool->FindEnumTypeByName("v1alpha1.HealthStatus");
  ASSERT_NE(health, nullptr);
  EXPECT_EQ(health->FindValueByName("UNKNOWN")->number(), 0);
  EXPECT_EQ(health->FindValueByName("HEALTHY")->number(), 1);
  EXPECT_EQ(health->FindValueByName("UNHEALTHY")->number(), 2);
  for (const char* p : kHealthPackages) {
    SCOPED_TRACE(p);
    const auto* s = pool->FindServiceByName(std::string(p) + ".DRAResourceHealth");
    ASSERT_NE(s, nullptr);
    const auto* m = s->FindMethodByName("NodeWatchResources");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->input_type()->full_name(), "v1alpha1.NodeWatchResourcesRequest");
    EXPECT_EQ(m->output_type()->full_name(), "v1alpha1.NodeWatchResourcesResponse");
  }
  struct Method {
    const char* service;
    const char* method;
    bool server_streaming;
  };
  for (const Method& m : std::vector<Method>{
           {"pluginregistration.Registration", "GetInfo", false},
           {"pluginregistration.Registration", "NotifyRegistrationStatus", false},
           {"k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", "NodePrepareResources", false},
           {"k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", "NodeUnprepareResources", false},
           {"k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", "NodePrepareResources", false},
           {"k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", "NodeUnprepareResources", false},
           {"v1.DRAResourceHealth", "NodeWatchResources", true},
           {"v1beta1.DRAResourceHealth", "NodeWatchResources", true},
           {"v1alpha1.DRAResourceHealth", "NodeWatchResources", true},
           {"v1.PodResourcesLister", "List", false},
           {"v1.PodResourcesLister", "GetAllocatableResources", false},
           {"v1.PodResourcesLister", "Get", false},
       }) {
    SCOPED_TRACE(std::string(m.service) + "/" + m.method);
    const auto* s = pool->FindServiceByName(m.service);
    ASSERT_NE(s, nullptr);
    const auto* d = s->FindMethodByName(m.method);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->server_streaming(), m.server_streaming);
    EXPECT_FALSE(d->client_streaming());
  }
}

// A message the 1.36 kubelet reads: field 5, length-delimited (tag 0x2a).
TEST(WireNumbersTest, AHealthMessageIsEncodedAsTheKubeletDecodesIt) {
  v1alpha1::DeviceHealth h;
  h.set_message("ecc");
  EXPECT_EQ(h.SerializeAsString(), std::string("\x2a\x03"
                                               "ecc"));
}

}  // namespace
}  // namespace gpu_agent::dra
