#include "agent/run/gpus_held.h"

#include <string_view>

#include "base/strings.h"

namespace gpu_agent {
namespace {

// The UUID a device ID names: a time-slice replica "<UUID>::<n>" names
// <UUID>.
std::string_view UuidOf(std::string_view id) {
  const size_t at = id.rfind("::");
  return at == std::string_view::npos ? id : id.substr(0, at);
}

// The GPU UUID `key` maps to in `m`, or null.
const std::string* Find(const std::map<std::string, std::string, std::less<>>& m,
                        std::string_view key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace

GpusHeld HeldByDevicePlugin(const DeviceModel& model, const nvml::Inventory& inventory,
                            const podresources::PodResources& pods) {
  // Every UUID of a GPU the model has (the GPU's and its MIG devices', all
  // of them: the plugin's cut may have been another) -> the GPU's UUID.
  std::map<std::string, std::string, std::less<>> gpu_of;
  // deviceIDStrategy index: "3", "3:1" -> the GPU's UUID; read only under a
  // GPU resource name, as other plugins' IDs may be numbers too.
  std::map<std::string, std::string, std::less<>> gpu_at;
  std::set<std::string, std::less<>> gpu_resources;
  for (const DeviceUnit& u : model.units) {
    const nvml::GpuRecord& g = u.gpu(inventory);
    if (!u.resource.empty()) gpu_resources.insert(u.resource);
    if (g.uuid.empty()) continue;
    gpu_of.emplace(g.uuid, g.uuid);
    gpu_at.emplace(StrCat(g.index), g.uuid);
    for (const nvml::MigRecord& m : g.mig_devices) {
      if (!m.uuid.empty()) gpu_of.emplace(m.uuid, g.uuid);
      gpu_at.emplace(StrCat(g.index, ":", m.index), g.uuid);
    }
  }
  for (const TimeSlicedResource& t : model.time_sliced) gpu_resources.insert(t.shared_resource);
  GpusHeld held;
  for (const podresources::HeldDevice& d : pods.devices) {
    const std::string_view id = UuidOf(d.id);
    const bool gpu_resource =
        d.resource.rfind("nvidia.com/", 0) == 0 || gpu_resources.count(d.resource) > 0;
    const std::string* gpu = Find(gpu_of, id);
    if (gpu == nullptr && gpu_resource) gpu = Find(gpu_at, id);
    if (gpu != nullptr) held[*gpu].insert(d.pod);
  }
  return held;
}

GpusHeld HeldThroughDra(const DeviceModel& model, const nvml::Inventory& inventory,
                        const podresources::PodResources& pods, const std::string& driver) {
  std::map<std::string, std::string> gpu_of;  // unit name -> GPU UUID
  for (const DeviceUnit& u : model.units) {
    const std::string& gpu = u.gpu(inventory).uuid;
    if (!gpu.empty()) gpu_of.emplace(u.name, gpu);
  }
  GpusHeld held;
  for (const podresources::HeldClaimDevice& d : pods.claim_devices) {
    if (d.driver != driver) continue;
    auto it = gpu_of.find(d.device);
    if (it != gpu_of.end()) held[it->second].insert(d.pod);
  }
  return held;
}

}  // namespace gpu_agent
