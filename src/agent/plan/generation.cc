#include "agent/plan/generation.h"

#include <utility>

#include "agent/plan/cdi_plan.h"
#include "agent/plan/nvml_start.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

// The model's time-slicing as the labels read it.
SharingByResource LabelSharingOf(const DeviceModel& model) {
  SharingByResource out;
  for (const TimeSlicedResource& t : model.time_sliced) {
    out[t.resource] = {t.replicas, t.shared_resource != t.resource};
  }
  return out;
}

}  // namespace

GenerationOptions GenerationOptionsFor(const Config& config) {
  GenerationOptions o;
  switch (config.agent_mode()) {
    case AgentMode::kPlugin:
      o.plan = GenerationOptions::Plan::kServe;
      o.cdi = GenerationOptions::Cdi::kWhenWritten;
      break;
    case AgentMode::kStatic:
      o.plan = GenerationOptions::Plan::kAdvertise;
      o.cdi = GenerationOptions::Cdi::kNever;
      break;
    case AgentMode::kDra:
      o.plan = GenerationOptions::Plan::kNone;
      o.cdi = GenerationOptions::Cdi::kWhenWritten;
      break;
  }
  return o;
}

absl::StatusOr<std::shared_ptr<const Generation>> BuildGeneration(
    LoadedConfig loaded, nvml::Inventory inventory, const GenerationOptions& options) {
  auto gen = std::make_shared<Generation>();
  gen->loaded = std::move(loaded);
  gen->inventory = std::move(inventory);
  const Config& c = gen->loaded.config;
  const nvml::Inventory& inv = gen->inventory;
  absl::StatusOr<GpuChoice> choice = ChooseGpus(c.devices, inv.gpus);
  if (!choice.ok()) return choice.status();
  gen->choice = *std::move(choice);
  auto warn = [&gen](const std::vector<std::string>& w) {
    gen->warnings.insert(gen->warnings.end(), w.begin(), w.end());
  };
  warn(gen->choice.warnings);
  gen->model = BuildDeviceModel(c, inv, gen->choice);
  warn(gen->model.warnings);
  if (options.plan != GenerationOptions::Plan::kNone) {
    absl::StatusOr<ResourcePlan> plan = options.plan == GenerationOptions::Plan::kServe
                                            ? PlanResources(c, inv, gen->model)
                                            : PlanAdvertised(c, inv, gen->model);
    // Whatever the code (a mig-minors file missing is kNotFound), a plan the
    // node cannot satisfy is the config's to fix: kInvalidArgument, exit 2.
    if (!plan.ok()) return absl::InvalidArgumentError(plan.status().message());
    gen->plan = *std::move(plan);
    warn(gen->plan.warnings);
  }
  gen->labels = ComputeNodeLabels(c, inv, gen->model.gpus, LabelSharingOf(gen->model));
  warn(gen->labels.warnings);
  const bool cdi = options.cdi == GenerationOptions::Cdi::kAlways ||
                   // DRA mode names every prepared device by CDI.
                   (options.cdi == GenerationOptions::Cdi::kWhenWritten &&
                    (CdiStrategyOn(c) || c.agent_mode() == AgentMode::kDra) &&
                    !c.cdi.spec_dir.empty() && !inv.gpus.empty());
  if (cdi) {
    absl::StatusOr<cdi::Generated> spec = GenerateCdiSpec(c, inv, gen->model);
    // The node's files (driver, device nodes, mig-minors), never the
    // config's (validated before): exit 1, as any other node problem.
    if (!spec.ok()) {
      return absl::FailedPreconditionError(
          StrCat("cannot generate the CDI spec: ", spec.status().message()));
    }
    gen->cdi = *std::move(spec);
    warn(gen->cdi->notes);
  }
  return std::shared_ptr<const Generation>(std::move(gen));
}

absl::StatusOr<std::shared_ptr<const Generation>> DiscoverGeneration(
    const LoadedConfig& loaded, const GenerationOptions& options) {
  absl::StatusOr<Discovered> found = DiscoverGpus(loaded.config);
  if (!found.ok()) return found.status();
  return BuildGeneration(loaded, std::move(found->inventory), options);
}

}  // namespace gpu_agent
