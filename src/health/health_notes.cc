#include "health/health_notes.h"

#include "base/strings.h"

namespace gpu_agent::health {
namespace {

std::string XidCheckName(const DeviceKey& key) {
  if (key.IsWholeGpu()) return "xid";
  if (key.compute_instance < 0) return StrCat("xid (GPU instance ", key.gpu_instance, ")");
  return StrCat("xid (GPU instance ", key.gpu_instance, ", compute instance ", key.compute_instance,
                ")");
}

constexpr const char* kCheckReason = "health check ";

}  // namespace

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

void HealthNotes::OnChange(const HealthChange& change) {
  if (!reporter_) return;
  std::lock_guard<std::mutex> lock(mu_);
  GpuHealthNote n;
  n.uuid = change.key.uuid;
  n.index = IndexOf(n.uuid);
  n.check = XidCheckName(change.key);
  if (!change.healthy) {
    // A polled check's outage is told by the check itself.
    if (change.reason.rfind(kCheckReason, 0) == 0) return;
    xid_out_.insert(change.key);
    n.level = Severity::kUnhealthy;
    n.value = change.reason;
  } else {
    if (xid_out_.erase(change.key) == 0) return;
    n.level = Severity::kOk;
    n.value = "back in service";
  }
  reporter_->Note(n);
}

void HealthNotes::OnCheck(const CheckChange& change) {
  if (!reporter_) return;
  std::lock_guard<std::mutex> lock(mu_);
  GpuHealthNote n;
  n.uuid = change.now.uuid;
  n.index = IndexOf(n.uuid);
  n.check = std::string(Spec(change.now.check).name);
  n.level = change.now.level;
  n.value = change.now.value;
  reporter_->Note(n);
}

NodeHealthReporterStats HealthNotes::stats() const {
  return reporter_ ? reporter_->stats() : NodeHealthReporterStats{};
}

}  // namespace gpu_agent::health
