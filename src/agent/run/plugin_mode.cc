#include "agent/run/plugin_mode.h"

#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

#include "agent/config/api_connection.h"
#include "agent/labels/nfd_feature_file.h"
#include "agent/plan/cdi_plan.h"
#include "agent/run/dra_drain.h"
#include "agent/run/held_watch.h"
#include "agent/run/mode_runner.h"
#include "agent/run/mode_switch.h"
#include "agent/run/reload.h"
#include "apiserver/connection.h"
#include "base/log.h"
#include "base/prom_text.h"
#include "base/strings.h"
#include "cdi/spec_file.h"
#include "deviceplugin/plugin_supervisor.h"
#include "health/health_watcher.h"

namespace gpu_agent {
namespace {

using deviceplugin::DevicePublisher;
using deviceplugin::ResourceRuntime;

void RenderPluginMetrics(const std::vector<ResourceRuntime>& runtimes,
                         deviceplugin::PluginSupervisor& sup, PromText* out) {
  PromText& p = *out;
  p.Family("gpu_agent_devices", "gauge", "Advertised devices by resource and health.");
  for (const ResourceRuntime& r : runtimes) {
    auto snap = r.publisher->Current();
    const double healthy = static_cast<double>(snap->HealthyCount());
    p.Sample("gpu_agent_devices", {{"resource", snap->resource_name}, {"health", "healthy"}},
             healthy);
    p.Sample("gpu_agent_devices", {{"resource", snap->resource_name}, {"health", "unhealthy"}},
             static_cast<double>(snap->devices.size()) - healthy);
  }
  const std::vector<deviceplugin::ResourceStatus> status = sup.Status();
  auto each = [&](const std::string& name, const std::string& type, const std::string& help,
                  auto value) {
    p.Family(name, type, help);
    for (const auto& s : status) p.Sample(name, {{"resource", s.resource_name}}, value(s));
  };
  each("gpu_agent_registered", "gauge", "1 when registered with the kubelet.",
       [](const auto& s) { return s.registered ? 1.0 : 0.0; });
  each("gpu_agent_registrations_total", "counter", "Successful registrations with the kubelet.",
       [](const auto& s) { return static_cast<double>(s.registrations); });
  each("gpu_agent_stream_lost_reregistrations_total", "counter",
       "Registrations again because the kubelet held no ListAndWatch stream.",
       [](const auto& s) { return static_cast<double>(s.stream_heals); });
  each("gpu_agent_listandwatch_streams", "gauge", "Open ListAndWatch streams.",
       [](const auto& s) { return static_cast<double>(s.open_streams); });
  each("gpu_agent_allocate_requests_total", "counter", "Allocate calls.",
       [](const auto& s) { return static_cast<double>(s.allocate_calls); });
  each("gpu_agent_allocate_errors_total", "counter", "Allocate calls refused.",
       [](const auto& s) { return static_cast<double>(s.allocate_errors); });
  each("gpu_agent_preferred_allocation_requests_total", "counter", "GetPreferredAllocation calls.",
       [](const auto& s) { return static_cast<double>(s.preferred_calls); });
  p.Family("gpu_agent_allocate_duration_seconds", "histogram",
           "Time to build an Allocate response, server side.");
  for (const auto& s : status) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < s.allocate_latency_buckets.size(); ++i) {
      cumulative += s.allocate_latency_buckets[i];
      const bool inf = i == std::size(deviceplugin::ServiceStats::kBucketsUs);
      char le[32];
      if (!inf) {
        std::snprintf(le, sizeof le, "%g",
                      static_cast<double>(deviceplugin::ServiceStats::kBucketsUs[i]) / 1e6);
      }
      p.Sample("gpu_agent_allocate_duration_seconds_bucket",
               {{"resource", s.resource_name}, {"le", inf ? "+Inf" : le}},
               static_cast<double>(cumulative));
    }
    p.Sample("gpu_agent_allocate_duration_seconds_sum", {{"resource", s.resource_name}},
             static_cast<double>(s.allocate_latency_ns_sum) / 1e9);
    p.Sample("gpu_agent_allocate_duration_seconds_count", {{"resource", s.resource_name}},
             static_cast<double>(cumulative));
  }
  p.Family("gpu_agent_kubelet_restarts_total", "counter", "Kubelet restarts seen.");
  p.Sample("gpu_agent_kubelet_restarts_total", {}, static_cast<double>(sup.kubelet_restarts()));
}

std::vector<ResourceRuntime> MakeRuntimes(const ResourcePlan& plan) {
  auto allocator = std::make_shared<const deviceplugin::Allocator>(plan.allocate);
  std::vector<ResourceRuntime> out;
  for (const deviceplugin::ResourceSpec& spec : plan.resources) {
    LogInfo("advertising resource", {{"resource", spec.resource_name},
                                     {"devices", StrCat(spec.devices.size())},
                                     {"endpoint", spec.endpoint}});
    out.push_back({std::make_shared<DevicePublisher>(spec), allocator});
  }
  return out;
}

// Where the health watcher's reports go: every resource's publisher.
std::function<void(const health::HealthChange&)> PublishHealth(
    const std::vector<ResourceRuntime>& runtimes) {
  std::vector<std::shared_ptr<DevicePublisher>> publishers;
  for (const ResourceRuntime& r : runtimes) publishers.push_back(r.publisher);
  return [publishers](const health::HealthChange& change) {
    for (const auto& p : publishers) p->SetHealth(change.key, change.healthy);
  };
}

deviceplugin::SupervisorOptions SupervisorFrom(const Config& c) {
  deviceplugin::SupervisorOptions o;
  o.own_thread = false;  // run's main thread drives it beside the signals
  o.kubelet_socket = c.kubelet.socket;
  o.stream_grace =
      std::chrono::duration_cast<std::chrono::milliseconds>(c.kubelet.stream_grace_period);
  return o;
}

// Writes the CDI spec of `gen` (when it has one) as the file `file` keeps;
// otherwise removes the file it wrote, if any. Errors name the setting and
// the file; on an error the file stays.
absl::Status KeepCdiSpec(const Generation& gen, cdi::SpecFile* file) {
  const Config& config = gen.config();
  if (!gen.cdi) {
    if (CdiStrategyOn(config)) {
      LogInfo(config.cdi.spec_dir.empty()
                  ? "cdi.specDir is empty: no CDI spec written; another tool must define the "
                    "devices Allocate names"
                  : "no GPUs: no CDI spec written",
              {{"kind", config.cdi.Kind()}});
    }
    file->Remove();
    return absl::OkStatus();
  }
  return file->Write(gen.cdi->spec, config.cdi.spec_dir, "cdi.specDir");
}

// Serves each generation's resources to the kubelet: one publisher per
// resource, the supervisor registering and healing, the CDI spec the
// Allocate names resolve through, the per-node config's label watch.
class PluginMode : public Mode {
 public:
  explicit PluginMode(const ModeContext& ctx) : ctx_(ctx) {}

  const char* name() const override { return "plugin"; }

  // Every failure here is the node's or the kubelet's, not the config's
  // (which the generation has checked): exit 1.
  absl::Status Start(const Generation& gen) override {
    // Fatal at start, as in NVIDIA's plugin: without the spec every Allocate
    // would name CDI devices no runtime can resolve (containers fail to
    // start, or start without GPUs), which is worse than a pod that says why.
    if (absl::Status s = KeepCdiSpec(gen, &cdi_spec_); !s.ok()) {
      return absl::FailedPreconditionError(StrCat("cannot write the CDI spec: ", s.message()));
    }
    ApplyNfdOutput(gen.config(), gen.labels.labels);
    std::vector<ResourceRuntime> runtimes = MakeRuntimes(gen.plan);
    // Health first: by the time the kubelet sees a device, its XIDs count.
    health().Replace(WatchHealth(gen, {}, {PublishHealth(runtimes), nullptr}));
    {
      std::lock_guard<std::mutex> lock(mu_);
      runtimes_ = runtimes;
    }
    // And the GPUs DRA claims still hold, before any is streamed healthy.
    drain_ = DraDrain::StartIfNeeded(
        gen, [this](const std::map<std::string, std::string>& holders) { Withhold(holders); });
    if (!drain_ && ctx_.mode_condition) {
      // After a switch, said; after a start (relabelled while the agent
      // was down, say), put right where the Node shows another mode.
      if (ctx_.switched_from.empty()) {
        ctx_.mode_condition->SetIfShown("DevicePlugin", kAllServed);
      } else {
        ctx_.mode_condition->Set("DevicePlugin", kAllServed);
      }
    }
    absl::StatusOr<std::unique_ptr<deviceplugin::PluginSupervisor>> sup =
        deviceplugin::PluginSupervisor::Start(SupervisorFrom(gen.config()), runtimes);
    if (!sup.ok()) {
      return absl::FailedPreconditionError(
          StrCat("cannot start the device plugin: ", sup.status().message()));
    }
    supervisor_ = *std::move(sup);
    ctx_.events->Drive(supervisor_.get());
    absl::StatusOr<std::unique_ptr<apiserver::NodeLabelWatch>> label_watch =
        WatchConfigLabel(gen.config(), ctx_.node_config, ctx_.events);
    if (!label_watch.ok()) {
      return absl::FailedPreconditionError(
          StrCat("cannot watch the node's config label: ", label_watch.status().message()));
    }
    label_watch_ = *std::move(label_watch);
    return absl::OkStatus();
  }

  absl::Status Reload(const Generation& /*running*/, const Generation& next) override {
    // On reload a failure keeps the running agent and the spec written
    // before (it still names the devices of the running config).
    if (absl::Status s = KeepCdiSpec(next, &cdi_spec_); !s.ok()) {
      LogError("cannot write the CDI spec for the reloaded config; the previous one stays",
               {{"error", std::string(s.message())}});
    }
    ApplyNfdOutput(next.config(), next.labels.labels);
    // Scrapes and probes read the runtimes meanwhile: the lock is held only
    // to swap them, never across the supervisor's Reload (which stops the
    // old servers, waiting for their streams to end). The old watcher,
    // stopped, stays readable until it is replaced.
    std::vector<health::HealthWatcher::Outage> carried = health().StopForReplacement();
    std::vector<ResourceRuntime> runtimes = MakeRuntimes(next.plan);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const ResourceRuntime& r : runtimes) r.publisher->SetWithheld(WithheldLocked());
    }
    std::unique_ptr<health::HealthWatcher> watcher =
        WatchHealth(next, std::move(carried), {PublishHealth(runtimes), nullptr});
    if (absl::Status s = supervisor_->Reload(runtimes); !s.ok()) {
      LogError("serving the reloaded resources failed; trying again",
               {{"error", std::string(s.message())}});
    }
    health().Replace(std::move(watcher));
    std::lock_guard<std::mutex> lock(mu_);
    runtimes_ = std::move(runtimes);
    // Again, with what the drain reported during the supervisor's reload.
    for (const ResourceRuntime& r : runtimes_) r.publisher->SetWithheld(WithheldLocked());
    return absl::OkStatus();
  }

  void Stop(const Generation& last, StopFor why) override {
    if (label_watch_) label_watch_->Stop();
    if (drain_) drain_->Stop();
    health().Stop();
    ctx_.events->Drive(nullptr);
    // Handing the node to DRA: on record before the plugin lets go, so that
    // DRA mode, in this process or after a restart at any point on, keeps
    // the GPUs this plugin's pods hold out of its slices.
    if (why == StopFor::kSwitch) {
      if (absl::Status s = RecordHandover(last.config(), "plugin"); !s.ok()) {
        LogWarning("cannot record the handover; a restart before it ends will not know of it",
                   {{"error", std::string(s.message())}});
      }
    }
    // Handing the node to DRA: allocatable 0 before the plugin's stream
    // ends, so that no pod the scheduler places from now on is sent to a
    // plugin that is gone (the kubelet refuses it), and once more after,
    // since a kubelet status sync in between would have put it back.
    if (why == StopFor::kSwitch) Release(last, /*say=*/false);
    if (supervisor_) supervisor_->Stop();
    if (why == StopFor::kSwitch) Release(last, /*say=*/true);
    // Handing the node to DRA: the pods that hold GPUs go on running, and a
    // container of theirs that restarts is given the CDI devices the
    // kubelet cached from Allocate, which this spec defines.
    if (why == StopFor::kExit) {
      cdi_spec_.Remove();
    } else {
      cdi_spec_.Keep();
    }
    LogInfo(why == StopFor::kExit ? "stopped; sockets removed"
                                  : "device plugin unregistered; sockets removed, CDI spec kept");
  }

  void RenderMetrics(PromText* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    RenderPluginMetrics(runtimes_, *supervisor_, p);
    p->Family("gpu_agent_handover_gpus_held", "gauge",
              "GPUs the other mode still holds while the node moves between the device plugin "
              "and DRA (here: prepared DRA claims), kept from this mode's pods.");
    p->Sample("gpu_agent_handover_gpus_held", {{"held_by", "dra"}},
              static_cast<double>(withheld_.size()));
  }

  bool Ready(std::string* why) override {
    if (!supervisor_->Ready()) {
      *why = "not registered with the kubelet, or no ListAndWatch stream open";
      return false;
    }
    // Ready, and saying which GPUs are not the device plugin's yet.
    std::lock_guard<std::mutex> lock(mu_);
    if (!withheld_.empty()) {
      *why = StrCat("handover from DRA: ", withheld_.size(),
                    " GPU(s) streamed unhealthy until their claims are unprepared: ",
                    DescribeHolders(withheld_));
    }
    return true;
  }

  bool Alive(std::string* why) override {
    // The gRPC servers answer a call, as the kubelet makes it.
    return supervisor_->Alive(std::chrono::seconds(1), why);
  }

 private:
  // Handing the node to DRA: the Node's allocatable of the resources served
  // goes to 0 now, so the scheduler sends their pods through DRA rather
  // than, until the kubelet's next status sync, to a plugin that is gone
  // (ReleaseAllocatable).
  // `say`: log the outcome (a failure is always logged).
  static void Release(const Generation& last, bool say) {
    std::vector<std::string> resources;
    for (const deviceplugin::ResourceSpec& r : last.plan.resources) {
      resources.push_back(r.resource_name);
    }
    const std::string names = StrJoin(resources, ",");
    if (absl::Status s = ReleaseAllocatable(last.config(), resources); !s.ok()) {
      LogWarning(
          "cannot set the node's allocatable of the device plugin's resources to 0; the kubelet's "
          "next status sync does (within its nodeStatusUpdateFrequency, 10 s by default)",
          {{"resources", names}, {"error", std::string(s.message())}});
      return;
    }
    if (!say) return;
    LogInfo(
        "the node's allocatable of the device plugin's resources is 0: the scheduler sends pods "
        "asking for them through DRA from now on",
        {{"resources", names}});
  }

  // The drain's report: these GPUs are streamed unhealthy, the others as
  // their health says.
  void Withhold(const std::map<std::string, std::string>& holders) {
    std::lock_guard<std::mutex> lock(mu_);
    if (holders.empty() && !withheld_.empty()) {
      LogInfo("handover from DRA done: every GPU is the device plugin's");
    } else if (!holders.empty()) {
      LogInfo(
          "handover from DRA: GPUs prepared for DRA claims are streamed unhealthy until "
          "their claims are unprepared",
          {{"gpus", StrCat(holders.size())}});
    }
    withheld_ = holders;
    for (const ResourceRuntime& r : runtimes_) r.publisher->SetWithheld(WithheldLocked());
    if (ctx_.mode_condition) {
      ctx_.mode_condition->Set(
          holders.empty() ? "DevicePlugin" : "MovingToDevicePlugin",
          holders.empty()
              ? kAllServed
              : StrCat("plugin mode; ", holders.size(),
                       " GPU(s) still prepared for DRA claims: ", DescribeHolders(holders)));
    }
  }

  static constexpr char kAllServed[] = "plugin mode; every GPU is served by the device plugin";

  std::set<std::string> WithheldLocked() const {
    std::set<std::string> out;
    for (const auto& [uuid, who] : withheld_) out.insert(uuid);
    return out;
  }

  const ModeContext& ctx_;
  cdi::SpecFile cdi_spec_;
  std::unique_ptr<deviceplugin::PluginSupervisor> supervisor_;  // set by Start
  std::unique_ptr<apiserver::NodeLabelWatch> label_watch_;      // null without a node config
  std::mutex mu_;
  std::vector<ResourceRuntime> runtimes_;  // protected by mu_: what is served
  // GPU UUID -> the DRA claims that hold it: streamed unhealthy.
  std::map<std::string, std::string> withheld_;  // protected by mu_
  std::unique_ptr<DraDrain> drain_;              // null: no DRA claim was left
};

}  // namespace

ModeEnd RunPluginMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen) {
  PluginMode mode(ctx);
  return RunMode(ctx, std::move(gen), mode);
}

}  // namespace gpu_agent
