#include "extended_resource_claim.h"

#include <algorithm>

#include "dra_kubelet.h"

namespace gpu_agent::testing {
namespace {

// The scheduler's IsDRAExtendedResourceName, for the names tests use: not
// one of Kubernetes' own (cpu, memory, hugepages-*, ephemeral-storage).
bool Extended(const std::string& name) { return name.find('/') != std::string::npos; }

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

std::string ExtendedRequestName(size_t index, const std::map<std::string, int64_t>& requests,
                                const std::string& resource) {
  // A std::map iterates in sorted order, as the scheduler's slices.Sort.
  size_t j = 0;
  for (const auto& [name, count] : requests) {
    if (name == resource) break;
    ++j;
  }
  return "container-" + std::to_string(index) + "-request-" + std::to_string(j);
}

ExtendedClaim MakeExtendedClaim(const ExtendedPod& pod, const std::string& uid,
                                const std::map<std::string, std::string>& classes,
                                const std::string& driver, const std::string& pool,
                                const std::vector<std::string>& devices) {
  ExtendedClaim c;
  c.name = pod.name + "-extended-resources-x7k2q";
  c.uid = uid;
  std::vector<const PodContainer*> all;
  for (const PodContainer& k : pod.init_containers) all.push_back(&k);
  for (const PodContainer& k : pod.containers) all.push_back(&k);
  std::string requests, results;
  size_t next = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    for (const auto& [resource, count] : all[i]->requests) {
      auto cls = classes.find(resource);
      if (!Extended(resource) || count == 0 || cls == classes.end()) continue;
      const std::string request = ExtendedRequestName(i, all[i]->requests, resource);
      c.request_names.push_back(request);
      c.mappings.push_back({all[i]->name, resource, request});
      if (!requests.empty()) requests += ",";
      requests += R"({"name":)" + Quoted(request) + R"(,"exactly":{"deviceClassName":)" +
                  Quoted(cls->second) + R"(,"allocationMode":"ExactCount","count":)" +
                  std::to_string(count) + "}}";
      for (int64_t n = 0; n < count && next < devices.size(); ++n) {
        if (!results.empty()) results += ",";
        results += R"({"request":)" + Quoted(request) + R"(,"driver":)" + Quoted(driver) +
                   R"(,"pool":)" + Quoted(pool) + R"(,"device":)" + Quoted(devices[next++]) + "}";
      }
    }
  }
  c.json = R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":)" +
           Quoted(c.name) + R"(,"generateName":)" + Quoted(pod.name + "-extended-resources-") +
           R"(,"namespace":)" + Quoted(pod.name_space) + R"(,"uid":)" + Quoted(uid) +
           R"(,"annotations":{"resource.kubernetes.io/extended-resource-claim":"true"},)" +
           R"("finalizers":["resource.kubernetes.io/delete-protection"],)" +
           R"("ownerReferences":[{"apiVersion":"v1","kind":"Pod","controller":true,"name":)" +
           Quoted(pod.name) + R"(,"uid":)" + Quoted(pod.uid) + R"(}]},)" +
           R"("spec":{"devices":{"requests":[)" + requests + "]}}," +
           R"("status":{"allocation":{"devices":{"results":[)" + results + "]}}," +
           R"("reservedFor":[{"resource":"pods","name":)" + Quoted(pod.name) + R"(,"uid":)" +
           Quoted(pod.uid) + "}]}}";
  return c;
}

std::vector<std::string> ExtendedContainerCdiIds(
    const dra::PrepareOutcome& claim, const std::vector<ExtendedRequestMapping>& mappings,
    const PodContainer& container) {
  std::vector<std::string> out;
  for (const ExtendedRequestMapping& m : mappings) {
    auto it = container.requests.find(m.resource);
    if (m.container != container.name || it == container.requests.end() || it->second == 0) {
      continue;
    }
    for (const std::string& id : DraKubelet::ContainerCdiIds(claim, m.request)) {
      out.push_back(id);
    }
  }
  return out;
}

}  // namespace gpu_agent::testing
