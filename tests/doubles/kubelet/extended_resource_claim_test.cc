// The stand-in's extended-resource claim is the one the 1.36 scheduler made
// on a real node (notes/extended-claim*.yaml): its request names, mappings
// and shape, and which CDI ids each container gets from it.
#include "extended_resource_claim.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

namespace gpu_agent::testing {
namespace {

TEST(ExtendedResourceClaimTest, RequestNamesCountEveryRequestOfTheContainerSorted) {
  // As seen: limits nvidia.com/gpu only -> container-0-request-0; the second
  // container asking cpu, memory and nvidia.com/gpu -> container-1-request-2.
  EXPECT_EQ(ExtendedRequestName(0, {{"nvidia.com/gpu", 1}}, "nvidia.com/gpu"),
            "container-0-request-0");
  EXPECT_EQ(
      ExtendedRequestName(1, {{"cpu", 1}, {"memory", 1}, {"nvidia.com/gpu", 2}}, "nvidia.com/gpu"),
      "container-1-request-2");
  EXPECT_EQ(ExtendedRequestName(3, {{"nvidia.com/gpu", 1}, {"nvidia.com/mig-1g.10gb", 1}},
                                "nvidia.com/mig-1g.10gb"),
            "container-3-request-1");
}

TEST(ExtendedResourceClaimTest, InitContainersComeFirstAndUnmappedResourcesGetNoRequest) {
  ExtendedPod pod{"team",
                  "trainer",
                  "pod-uid",
                  {{"setup", {{"nvidia.com/gpu", 1}}}},
                  {{"side", {{"cpu", 1}}},
                   {"main", {{"cpu", 1}, {"memory", 1}, {"nvidia.com/gpu", 2}}},
                   {"other", {{"example.com/fpga", 1}}}}};
  const ExtendedClaim c = MakeExtendedClaim(
      pod, "claim-uid", {{"nvidia.com/gpu", "nvidia-gpu.gpu.gpu-agent.github.io"}},
      "gpu.gpu-agent.github.io", "node-a", {"gpu-a", "gpu-b", "gpu-c"});
  EXPECT_EQ(c.request_names,
            (std::vector<std::string>{"container-0-request-0", "container-2-request-2"}));
  EXPECT_EQ(c.mappings, (std::vector<ExtendedRequestMapping>{
                            {"setup", "nvidia.com/gpu", "container-0-request-0"},
                            {"main", "nvidia.com/gpu", "container-2-request-2"}}));
  rapidjson::Document d;
  d.Parse(c.json.c_str());
  ASSERT_FALSE(d.HasParseError()) << c.json;
  EXPECT_STREQ(
      d["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"].GetString(),
      "true");
  EXPECT_STREQ(d["metadata"]["ownerReferences"][0]["uid"].GetString(), "pod-uid");
  const auto& reqs = d["spec"]["devices"]["requests"];
  ASSERT_EQ(reqs.Size(), 2u);
  EXPECT_STREQ(reqs[1]["exactly"]["deviceClassName"].GetString(),
               "nvidia-gpu.gpu.gpu-agent.github.io");
  EXPECT_EQ(reqs[1]["exactly"]["count"].GetInt(), 2);
  const auto& results = d["status"]["allocation"]["devices"]["results"];
  ASSERT_EQ(results.Size(), 3u);
  EXPECT_STREQ(results[0]["request"].GetString(), "container-0-request-0");
  EXPECT_STREQ(results[2]["device"].GetString(), "gpu-c");
  EXPECT_STREQ(results[2]["request"].GetString(), "container-2-request-2");
}

TEST(ExtendedResourceClaimTest, EachContainerGetsTheCdiIdsOfItsOwnRequestsOnly) {
  dra::PrepareOutcome prepared;
  prepared.devices = {{{"container-0-request-0"}, "node-a", "gpu-a", {"k/claim=a"}, ""},
                      {{"container-1-request-2"}, "node-a", "gpu-b", {"k/claim=b"}, ""},
                      {{"container-1-request-2"}, "node-a", "gpu-c", {"k/claim=c"}, ""}};
  const std::vector<ExtendedRequestMapping> mappings = {
      {"first", "nvidia.com/gpu", "container-0-request-0"},
      {"second", "nvidia.com/gpu", "container-1-request-2"}};
  EXPECT_EQ(ExtendedContainerCdiIds(prepared, mappings, {"first", {{"nvidia.com/gpu", 1}}}),
            std::vector<std::string>{"k/claim=a"});
  EXPECT_EQ(
      ExtendedContainerCdiIds(prepared, mappings, {"second", {{"cpu", 1}, {"nvidia.com/gpu", 2}}}),
      (std::vector<std::string>{"k/claim=b", "k/claim=c"}));
  // The kubelet goes by the container's own requests: a container that does
  // not ask for the resource gets nothing, whatever a mapping says.
  EXPECT_TRUE(ExtendedContainerCdiIds(prepared, mappings, {"second", {{"cpu", 1}}}).empty());
  EXPECT_TRUE(
      ExtendedContainerCdiIds(prepared, mappings, {"third", {{"nvidia.com/gpu", 1}}}).empty());
}

}  // namespace
}  // namespace gpu_agent::testing
