#include "agent/run/health_notes.h"

#include "agent/config/api_connection.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

apiserver::GpuHealthLevel LevelOf(health::CheckLevel l) {
  switch (l) {
    case health::CheckLevel::kOk:
      return apiserver::GpuHealthLevel::kOk;
    case health::CheckLevel::kDegraded:
      return apiserver::GpuHealthLevel::kDegraded;
    case health::CheckLevel::kUnhealthy:
      return apiserver::GpuHealthLevel::kUnhealthy;
  }
  return apiserver::GpuHealthLevel::kOk;
}

std::string XidCheckName(const DeviceKey& key) {
  if (key.IsWholeGpu()) return "xid";
  if (key.compute_instance < 0) return StrCat("xid (GPU instance ", key.gpu_instance, ")");
  return StrCat("xid (GPU instance ", key.gpu_instance, ", compute instance ", key.compute_instance,
                ")");
}

constexpr const char* kCheckReason = "health check ";

}  // namespace

std::shared_ptr<HealthNotes> HealthNotes::Start(const Config& config, bool static_mode) {
  const std::string& setting = config.health.node_events;
  const bool wanted = setting == "on" || (setting == "auto" && static_mode);
  auto off = [](const std::string& why) {
    LogInfo("GPU health events on the Node and its GpuHealthy condition are off", {{"why", why}});
    return std::shared_ptr<HealthNotes>(new HealthNotes(nullptr));
  };
  if (!wanted) {
    return off(setting == "off" ? "health.nodeEvents is off"
                                : "plugin mode has no API connection unless given one: set "
                                  "health.nodeEvents: on (RBAC: events create, nodes/status "
                                  "patch) to turn them on");
  }
  if (config.node_name.empty()) return off("no node name: set nodeName, --node-name or NODE_NAME");
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  if (!conn.ok()) return off(StrCat("no API connection: ", conn.status().message()));
  apiserver::NodeHealthReporterOptions o;
  o.node = config.node_name;
  o.rest = RestOptionsFor(config);
  absl::StatusOr<std::unique_ptr<apiserver::NodeHealthReporter>> r =
      apiserver::NodeHealthReporter::Start(*conn, o);
  if (!r.ok()) return off(std::string(r.status().message()));
  LogInfo("GPU health events go on the Node, with its GpuHealthy condition",
          {{"node", config.node_name}, {"api", conn->description}});
  return std::shared_ptr<HealthNotes>(new HealthNotes(*std::move(r)));
}

HealthNotes::~HealthNotes() { Stop(); }

void HealthNotes::Stop() {
  if (reporter_) reporter_->Stop();
}

void HealthNotes::SetGpus(const nvml::Inventory& inventory) {
  std::lock_guard<std::mutex> lock(mu_);
  index_.clear();
  for (const nvml::GpuRecord& g : inventory.gpus) index_[g.uuid] = static_cast<int>(g.index);
}

int HealthNotes::IndexOf(const std::string& uuid) const {
  auto it = index_.find(uuid);
  return it == index_.end() ? -1 : it->second;
}

void HealthNotes::OnChange(const health::HealthChange& change) {
  if (!reporter_) return;
  std::lock_guard<std::mutex> lock(mu_);
  apiserver::GpuHealthNote n;
  n.uuid = change.key.uuid;
  n.index = IndexOf(n.uuid);
  n.check = XidCheckName(change.key);
  if (!change.healthy) {
    // A polled check's outage is told by the check itself.
    if (change.reason.rfind(kCheckReason, 0) == 0) return;
    xid_out_.insert(change.key);
    n.level = apiserver::GpuHealthLevel::kUnhealthy;
    n.value = change.reason;
  } else {
    if (xid_out_.erase(change.key) == 0) return;
    n.level = apiserver::GpuHealthLevel::kOk;
    n.value = "back in service";
  }
  reporter_->Note(n);
}

void HealthNotes::OnCheck(const health::CheckChange& change) {
  if (!reporter_) return;
  std::lock_guard<std::mutex> lock(mu_);
  apiserver::GpuHealthNote n;
  n.uuid = change.now.uuid;
  n.index = IndexOf(n.uuid);
  n.check = std::string(health::Spec(change.now.check).name);
  n.level = LevelOf(change.now.level);
  n.value = change.now.value;
  reporter_->Note(n);
}

apiserver::NodeHealthReporterStats HealthNotes::stats() const {
  return reporter_ ? reporter_->stats() : apiserver::NodeHealthReporterStats{};
}

}  // namespace gpu_agent
