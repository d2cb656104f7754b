// devices.include / devices.exclude selectors and the cap, applied to a
// fixed inventory of four GPUs.
//
// Input: "<include lines>\0<exclude lines>\0<max>".
#include <algorithm>
#include <string>

#include "agent/config/device_selection.h"
#include "fuzz_support.h"

using namespace gpu_agent;

namespace {

std::vector<nvml::GpuRecord> Inventory() {
  std::vector<nvml::GpuRecord> gpus;
  const char* names[] = {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 PCIe",
                         "Tesla T4"};
  const uint32_t ids[] = {0x20b210de, 0x20b210de, 0x233110de, 0x1eb810de};
  for (unsigned i = 0; i < 4; ++i) {
    nvml::GpuRecord g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i) + "b2c3d4e-0000-1111-2222-33334444555" + std::to_string(i);
    g.name = names[i];
    g.pci_device_id = ids[i];
    g.minor = static_cast<int>(i);
    gpus.push_back(g);
  }
  return gpus;
}

std::vector<std::string> Lines(std::string_view part) {
  std::vector<std::string> out;
  if (part.empty()) return out;
  for (std::string_view l : fuzz::Split(part, '\n', 64)) out.emplace_back(l);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<nvml::GpuRecord> gpus = Inventory();
  const std::vector<std::string_view> parts = fuzz::Split(fuzz::AsView(data, size), '\0', 3);
  Config::DeviceSelection sel;
  sel.include = Lines(parts[0]);
  if (parts.size() > 1) sel.exclude = Lines(parts[1]);
  if (parts.size() > 2 && !parts[2].empty()) sel.max = static_cast<unsigned char>(parts[2][0]) % 6;

  for (size_t i = 0; i < sel.include.size(); ++i) {
    absl::StatusOr<GpuSelector> s = ParseGpuSelector(sel.include[i], "devices.include[0]");
    if (!s.ok()) continue;
    for (const nvml::GpuRecord& g : gpus) (void)s->Matches(g);
  }
  const absl::Status valid = ValidateDeviceSelection(sel);
  absl::StatusOr<GpuChoice> choice = ChooseGpus(sel, gpus);
  if (!valid.ok()) {
    fuzz::Check(!choice.ok(), "ChooseGpus took a selection ValidateDeviceSelection refused");
    return 0;
  }
  if (!choice.ok()) {
    fuzz::Check(!choice.status().message().empty(), "error without a message");
    return 0;
  }
  fuzz::Check(std::is_sorted(choice->chosen.begin(), choice->chosen.end()), "chosen not sorted");
  fuzz::Check(
      std::adjacent_find(choice->chosen.begin(), choice->chosen.end()) == choice->chosen.end(),
      "a GPU chosen twice");
  for (size_t i : choice->chosen) fuzz::Check(i < gpus.size(), "chose a GPU not in the list");
  if (sel.max > 0) {
    fuzz::Check(choice->chosen.size() <= static_cast<size_t>(sel.max), "the cap was passed");
  }
  return 0;
}
