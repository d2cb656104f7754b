#include "agent/run/health_wiring.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "agent/config/api_connection.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {

health::HealthPolicy HealthPolicyFrom(const Config& c) {
  health::HealthPolicy p;
  p.disabled = c.health.disabled;
  p.ignored_xids = {c.health.ignored_xids.begin(), c.health.ignored_xids.end()};
  p.critical_xids = {c.health.critical_xids.begin(), c.health.critical_xids.end()};
  p.reset_xids = {c.health.reset_xids.begin(), c.health.reset_xids.end()};
  p.recovery_period = c.health.recovery_period;
  p.wait_timeout = c.health.event_wait_timeout;
  p.poll_interval = std::chrono::duration_cast<std::chrono::milliseconds>(c.health.poll_interval);
  p.checks = c.health.checks;
  // Short: the thread sees no XID while it backs off, so a burst of failed
  // waits must not blind it for long; 1 s is still far from spinning.
  p.max_backoff = std::min<std::chrono::milliseconds>(2 * p.wait_timeout, std::chrono::seconds(1));
  return p;
}

std::shared_ptr<health::HealthNotes> StartHealthNotes(const Config& config, std::string_view mode) {
  const std::string& setting = config.health.node_events;
  const bool wanted = setting == "on" || (setting == "auto" && mode == "static");
  auto off = [](const std::string& why) {
    LogInfo("GPU health events on the Node and its GpuHealthy condition are off", {{"why", why}});
    return std::make_shared<health::HealthNotes>(nullptr);
  };
  if (!wanted) {
    if (setting == "off") return off("health.nodeEvents is off");
    return off(mode == "plugin"
                   ? "plugin mode has no API connection unless given one: set health.nodeEvents: "
                     "on (RBAC: events create, nodes/status patch) to turn them on"
                   : StrCat("health.nodeEvents: auto turns them on in static mode only: set "
                            "health.nodeEvents: on (RBAC: events create, nodes/status patch) to "
                            "turn them on in ",
                            mode, " mode"));
  }
  if (config.node_name.empty()) return off("no node name: set nodeName, --node-name or NODE_NAME");
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  if (!conn.ok()) return off(StrCat("no API connection: ", conn.status().message()));
  health::NodeHealthReporterOptions o;
  o.node = config.node_name;
  o.rest = RestOptionsFor(config);
  absl::StatusOr<std::unique_ptr<health::NodeHealthReporter>> r =
      health::NodeHealthReporter::Start(*conn, o);
  if (!r.ok()) return off(std::string(r.status().message()));
  LogInfo("GPU health events go on the Node, with its GpuHealthy condition",
          {{"node", config.node_name}, {"api", conn->description}});
  return std::make_shared<health::HealthNotes>(*std::move(r));
}

}  // namespace gpu_agent
