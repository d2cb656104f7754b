// One generation: everything a start or a reload serves, computed once from
// the config and the NVML inventory and never changed after. Every mode and
// every command reads it; nothing chooses GPUs, plans resources, computes
// labels or builds the CDI spec a second time, so Allocate's device IDs, the
// CDI spec's device names, the advertised counts and the labels all come from
// the same chosen GPUs. A reload builds a new generation and swaps it in
// whole; readers holding the old one keep a consistent view.
#ifndef GPU_AGENT_AGENT_PLAN_GENERATION_H_
#define GPU_AGENT_AGENT_PLAN_GENERATION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config_loader.h"
#include "agent/config/device_selection.h"
#include "agent/labels/gpu_labels.h"
#include "agent/plan/resource_plan.h"
#include "cdi/generator.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct Generation {
  LoadedConfig loaded;
  nvml::Inventory inventory;
  GpuChoice choice;    // the GPUs devices.* exposes, chosen once
  ResourcePlan plan;   // what is served or advertised
  LabelResult labels;  // the GPU labels of the chosen GPUs
  // This node's CDI spec, when GenerationOptions asked for one.
  std::optional<cdi::Generated> cdi;
  // What an operator should hear about, once, in order: the selection's,
  // the plan's, the labels' and the CDI spec's.
  std::vector<std::string> warnings;

  const Config& config() const { return loaded.config; }
};

struct GenerationOptions {
  // Plan what plugin mode serves (MIG devices' capability nodes included
  // when passDeviceSpecs asks), or only what is advertised (static mode,
  // `capacity set --discover`).
  bool serving = true;
  // kWhenWritten: the spec plugin mode writes (a cdi-* strategy on,
  // cdi.specDir set, a GPU on the node); kAlways: `cdi generate`.
  enum class Cdi { kNever, kWhenWritten, kAlways };
  Cdi cdi = Cdi::kWhenWritten;
};

// What `mode` (plugin or static) builds: plugin serves and writes the CDI
// spec it names; static only advertises.
GenerationOptions GenerationOptionsFor(const Config& config);

// Errors name the setting, GPU or file: a selection, plan or CDI spec the
// inventory cannot satisfy (kInvalidArgument for a config in error).
absl::StatusOr<std::shared_ptr<const Generation>> BuildGeneration(LoadedConfig loaded,
                                                                  nvml::Inventory inventory,
                                                                  const GenerationOptions& options);

// For a one-shot command: the GPUs discovered (DiscoverGpus), then
// BuildGeneration, so the command reads what `run` would.
absl::StatusOr<std::shared_ptr<const Generation>> DiscoverGeneration(
    const LoadedConfig& loaded, const GenerationOptions& options);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_PLAN_GENERATION_H_
