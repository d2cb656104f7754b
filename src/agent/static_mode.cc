#include "agent/static_mode.h"

#include <signal.h>

#include <mutex>
#include <set>

#include "agent/commands.h"
#include "agent/mode_common.h"
#include "agent/signals.h"
#include "agent/version.h"
#include "apiserver/capacity_reconciler.h"
#include "apiserver/connection.h"
#include "base/log.h"
#include "base/strings.h"
#include "nvml/health_watcher.h"

namespace gpu_agent {
namespace {

// Healthy GPUs x replicas, updated from health changes.
class DesiredCount {
 public:
  DesiredCount(const Config& c, const nvml::Inventory& inv) {
    for (const TimeSlicingResource& r : c.sharing.time_slicing.resources) {
      if (r.name == c.resource_name) replicas_ = r.replicas;
    }
    for (const nvml::GpuRecord& g : inv.gpus) {
      if (g.uuid.empty()) continue;
      uuids_.push_back(g.uuid);
      if (!g.error.empty()) unhealthy_.insert(g.uuid);
    }
  }
  int64_t Value() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(uuids_.size() - unhealthy_.size()) * replicas_;
  }
  int64_t Apply(const nvml::HealthChange& c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (c.healthy) {
      unhealthy_.erase(c.uuid);
    } else {
      unhealthy_.insert(c.uuid);
    }
    return static_cast<int64_t>(uuids_.size() - unhealthy_.size()) * replicas_;
  }
  const std::vector<std::string>& uuids() const { return uuids_; }
  std::set<std::string> unhealthy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unhealthy_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> uuids_;
  std::set<std::string> unhealthy_;
  int64_t replicas_ = 1;
};

struct Running {
  std::shared_ptr<DesiredCount> desired;
  std::unique_ptr<apiserver::CapacityReconciler> reconciler;
  std::unique_ptr<nvml::HealthWatcher> health;
};

absl::Status StartAll(const Config& config, const nvml::Inventory& inv,
                      const std::shared_ptr<const nvml::NvmlLibrary>& lib, Running* out) {
  absl::StatusOr<apiserver::Connection> conn =
      apiserver::ResolveConnection(ConnectionOptionsFrom(config), ProcessEnv());
  if (!conn.ok()) return conn.status();
  out->desired = std::make_shared<DesiredCount>(config, inv);
  apiserver::ReconcilerOptions opts;
  opts.node = config.node_name;
  opts.resource = config.resource_name;
  opts.allocatable = config.static_mode.allocatable;
  opts.resync = config.static_mode.resync_interval;
  opts.rest.user_agent = StrCat("gpu-agent/", kVersion);
  opts.rest.read_timeout = config.api_server.request_timeout;
  LogInfo("static mode: keeping node capacity", {{"node", opts.node},
                                                 {"resource", opts.resource},
                                                 {"value", StrCat(out->desired->Value())},
                                                 {"api", conn->description}});
  absl::StatusOr<std::unique_ptr<apiserver::CapacityReconciler>> rec =
      apiserver::CapacityReconciler::Start(*conn, opts, out->desired->Value());
  if (!rec.ok()) return rec.status();
  out->reconciler = *std::move(rec);
  if (lib) {
    apiserver::CapacityReconciler* r = out->reconciler.get();
    std::shared_ptr<DesiredCount> d = out->desired;
    out->health = nvml::HealthWatcher::Start(
        lib, d->uuids(), d->unhealthy(), HealthPolicyFrom(config),
        [r, d](const nvml::HealthChange& c) { r->SetDesired(d->Apply(c)); });
  }
  return absl::OkStatus();
}

void StopAll(Running* r, bool remove) {
  if (r->health) r->health->Stop();
  if (r->reconciler) {
    absl::Status s = r->reconciler->Stop(remove);
    if (!s.ok())
      LogError("could not remove the resource on exit", {{"error", std::string(s.message())}});
  }
  r->health.reset();
  r->reconciler.reset();
}

}  // namespace

int RunStaticMode(const ConfigRequest& request, LoadedConfig loaded,
                  std::shared_ptr<const nvml::NvmlLibrary> lib, nvml::Inventory inventory) {
  if (loaded.config.node_name.empty()) {
    LogError(
        "static mode needs this node's name: set nodeName, --node-name or NODE_NAME "
        "(in a pod, from the downward API: spec.nodeName)");
    return kExitUsage;
  }
  Running running;
  if (absl::Status s = StartAll(loaded.config, inventory, lib, &running); !s.ok()) {
    LogError("cannot start static mode", {{"error", std::string(s.message())}});
    return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  for (;;) {
    const int sig = WaitForSignal();
    if (sig != SIGHUP) {
      LogInfo("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      break;
    }
    std::optional<Reloaded> next = ReloadForSighup(request, loaded.config, lib);
    if (!next) continue;
    StopAll(&running, false);
    if (absl::Status s = StartAll(next->loaded.config, next->inventory, lib, &running); !s.ok()) {
      LogError("reloaded config cannot run; exiting", {{"error", std::string(s.message())}});
      return kExitFailure;
    }
    loaded = std::move(next->loaded);
  }
  StopAll(&running, loaded.config.static_mode.remove_on_exit);
  return kExitOk;
}

}  // namespace gpu_agent
