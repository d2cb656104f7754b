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

}  // namespace

GpusHeld HeldByDevicePlugin(const DeviceModel& model, const nvml::Inventory& inventory,
                            const podresources::PodResources& pods) {
  // Every UUID of a GPU the model has (the GPU's and its MIG devices', all
  // of them: the plugin's cut may have been another) -> the GPU's UUID.
  std::map<std::string, std::string, std::less<>> gpu_of;
  for (const DeviceUnit& u : model.units) {
    const nvml::GpuRecord& g = u.gpu(inventory);
    if (g.uuid.empty()) continue;
    gpu_of.emplace(g.uuid, g.uuid);
    for (const nvml::MigRecord& m : g.mig_devices) {
      if (!m.uuid.empty()) gpu_of.emplace(m.uuid, g.uuid);
    }
  }
  GpusHeld held;
  for (const podresources::HeldDevice& d : pods.devices) {
    auto it = gpu_of.find(UuidOf(d.id));
    if (it != gpu_of.end()) held[it->second].insert(d.pod);
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

std::string DescribeHeld(const GpusHeld& held) {
  std::string out;
  for (const auto& [gpu, holders] : held) {
    if (!out.empty()) out += ", ";
    out += StrCat(gpu, " (", StrJoin(holders, ", "), ")");
  }
  return out;
}

}  // namespace gpu_agent
