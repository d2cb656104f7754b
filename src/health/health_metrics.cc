#include "health/health_metrics.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

namespace gpu_agent::health {
namespace {

struct Gauge {
  const char* name;
  const char* help;
};

// The per-check gauge of each check, in CheckId order.
Gauge GaugeOf(CheckId id) {
  switch (id) {
    case CheckId::kRowRemapPending:
      return {"gpu_agent_gpu_row_remap_pending", "1 while a row remap waits for a GPU reset."};
    case CheckId::kRowRemapFailed:
      return {"gpu_agent_gpu_row_remap_failed", "1 once row remapping has failed."};
    case CheckId::kRetiredPagesPending:
      return {"gpu_agent_gpu_retired_pages_pending",
              "1 while page retirement waits for a GPU reset (before Ampere)."};
    case CheckId::kEccUncorrectable:
      return {"gpu_agent_gpu_ecc_uncorrectable_new",
              "Volatile uncorrectable ECC errors new since the previous poll."};
    case CheckId::kRecoveryAction:
      return {"gpu_agent_gpu_recovery_action",
              "The recovery action the driver asks for (0 none, 1 GPU reset, 2 node reboot, 3 "
              "drain P2P, 4 drain and reset)."};
    case CheckId::kTemperature:
      return {"gpu_agent_gpu_temperature_celsius", "GPU temperature."};
    case CheckId::kClockEvents:
      return {"gpu_agent_gpu_clock_slowdown_reasons",
              "Clock event reasons holding clocks down in hardware (bit mask of NVML's "
              "HwSlowdown 0x8, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80)."};
    case CheckId::kNvLink:
      return {"gpu_agent_gpu_nvlinks_down", "NVLink links down of those up at discovery."};
    case CheckId::kPcieWidth:
      return {"gpu_agent_gpu_pcie_link_width", "Current PCIe link width (lanes)."};
    case CheckId::kPcieGeneration:
      return {"gpu_agent_gpu_pcie_link_generation", "Current PCIe link generation."};
    case CheckId::kPcieReplays:
      return {"gpu_agent_gpu_pcie_replays_per_minute",
              "PCIe replays a minute between the last two polls."};
  }
  return {"gpu_agent_gpu_check_value", ""};
}

double Level(Severity l) {
  switch (l) {
    case Severity::kOk:
      return 0;
    case Severity::kDegraded:
      return 1;
    case Severity::kUnhealthy:
      return 2;
  }
  return 0;
}

}  // namespace

void RenderHealthMetrics(const std::vector<CheckStatus>& checks,
                         const std::vector<HealthWatcher::Outage>& outages, uint64_t polls,
                         uint64_t poll_calls, PromText* out) {
  PromText& p = *out;
  p.Family("gpu_agent_gpu_health", "gauge",
           "A GPU's standing on a polled check: 0 ok, 1 degraded, 2 unhealthy; check=\"overall\" "
           "is its worst, an XID or lost-GPU outage counting 2.");
  std::map<std::string, double> overall;
  for (const CheckStatus& c : checks) {
    p.Sample("gpu_agent_gpu_health", {{"uuid", c.uuid}, {"check", std::string(Spec(c.check).name)}},
             Level(c.level));
    double& o = overall[c.uuid];
    o = std::max(o, Level(c.level));
  }
  for (const HealthWatcher::Outage& o : outages) overall[o.key.uuid] = 2;
  for (const auto& [uuid, level] : overall) {
    p.Sample("gpu_agent_gpu_health", {{"uuid", uuid}, {"check", "overall"}}, level);
  }
  for (const CheckSpec& spec : CheckSpecs()) {
    const Gauge g = GaugeOf(spec.id);
    bool family = false;
    for (const CheckStatus& c : checks) {
      if (c.check != spec.id || std::isnan(c.number)) continue;
      if (!family) p.Family(g.name, "gauge", g.help);
      family = true;
      p.Sample(g.name, {{"uuid", c.uuid}}, c.number);
    }
  }
  p.Family("gpu_agent_health_polls_total", "counter", "Polls of the GPU health checks.");
  p.Sample("gpu_agent_health_polls_total", {}, static_cast<double>(polls));
  p.Family("gpu_agent_health_poll_nvml_calls_total", "counter",
           "NVML calls the health check polls made.");
  p.Sample("gpu_agent_health_poll_nvml_calls_total", {}, static_cast<double>(poll_calls));
}

}  // namespace gpu_agent::health
