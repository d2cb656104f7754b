#include "agent/cli/health_command.h"

#include <cstdio>

#include "agent/cli/health_report.h"
#include "agent/plan/nvml_start.h"
#include "base/clock.h"
#include "base/exit_code.h"
#include "base/strings.h"
#include "health/health_poller.h"
#include "nvml/gpu_handles.h"
#include "nvml/inventory.h"

namespace gpu_agent {

int HealthCommand(const LoadedConfig& loaded, const std::string& output) {
  absl::StatusOr<Discovered> found = DiscoverGpus(loaded.config);
  if (!found.ok()) {
    std::fprintf(stderr, "gpu-agent: %s\n", std::string(found.status().message()).c_str());
    return kExitFailure;
  }
  const nvml::Inventory& inv = found->inventory;
  std::vector<std::string> uuids;
  for (const nvml::GpuRecord& g : inv.gpus) {
    if (!g.uuid.empty()) uuids.push_back(g.uuid);
  }
  nvml::GpuHandles handles(*found->lib, uuids);
  health::HealthPoller poller(*found->lib, &handles, uuids, loaded.config.health.checks,
                              Clock::Real(), /*log_off=*/false);
  poller.set_call_budget(SIZE_MAX);  // one report: every link
  std::vector<health::GpuVerdict> verdicts = poller.Poll();
  HealthReport report;
  report.driver_version = inv.driver_version;
  report.settings = loaded.config.health.checks;
  size_t polled = 0;
  for (const nvml::GpuRecord& g : inv.gpus) {
    GpuHealthReport gr;
    gr.index = g.index;
    gr.uuid = g.uuid;
    gr.name = g.name;
    gr.verdict.uuid = g.uuid;
    gr.verdict.lost = g.lost;
    for (health::GpuVerdict& v : verdicts) {
      if (v.uuid != g.uuid) continue;
      gr.verdict = std::move(v);
      if (!gr.verdict.results.empty()) ++polled;
      if (gr.verdict.results.empty() && !gr.verdict.lost) {
        gr.error = StrCat("no NVML handle: ", found->lib->ErrorText(gr.verdict.no_handle));
      }
    }
    if (g.uuid.empty()) gr.error = g.error.empty() ? "NVML gave no UUID" : g.error;
    report.gpus.push_back(std::move(gr));
  }
  if (polled > 0) {
    report.poll_calls_per_gpu =
        static_cast<double>(poller.poll_calls()) / static_cast<double>(polled);
  }
  const std::string text = output == "json"   ? HealthAsJson(report)
                           : output == "yaml" ? HealthAsYaml(report)
                                              : HealthAsTable(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace gpu_agent
