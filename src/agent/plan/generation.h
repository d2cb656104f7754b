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
#include "agent/plan/device_model.h"
#include "agent/plan/resource_plan.h"
#include "cdi/generator.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct Generation {
  LoadedConfig loaded;
  nvml::Inventory inventory;
  GpuChoice choice;    // the GPUs devices.* exposes, chosen once
  DeviceModel model;   // the chosen GPUs expanded into units, once
  ResourcePlan plan;   // the device plugin's resources (empty when not asked for)
  LabelResult labels;  // the GPU labels of the model's GPUs
  // This node's CDI spec, when GenerationOptions asked for one.
  std::optional<cdi::Generated> cdi;
  // What an operator should hear about, once, in order: the selection's,
  // the model's, the plan's, the labels' and the CDI spec's.
  std::vector<std::string> warnings;

  const Config& config() const { return loaded.config; }
};

struct GenerationOptions {
  // kServe: the resources plugin mode serves (MIG devices' capability nodes
  // included when passDeviceSpecs asks); kAdvertise: only what is advertised
  // (static mode, `capacity set --discover`); kNone: no device-plugin
  // resources at all (DRA mode, whose devices no device-plugin rule limits).
  enum class Plan { kServe, kAdvertise, kNone };
  Plan plan = Plan::kServe;
  // kWhenWritten: the spec the mode writes (plugin mode with a cdi-*
  // strategy on, DRA mode always; cdi.specDir set, a GPU on the node);
  // kAlways: `cdi generate`.
  enum class Cdi { kNever, kWhenWritten, kAlways };
  Cdi cdi = Cdi::kWhenWritten;
};

// What the config's mode builds: plugin serves and writes the CDI spec it
// names; static only advertises; DRA publishes the model's devices and names
// each prepared one by CDI.
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
