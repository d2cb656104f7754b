// What the supervisor reports: the status copy the control thread
// publishes, and the readiness and liveness read from it by the metrics
// endpoint's threads.
#include <algorithm>

#include "base/strings.h"
#include "deviceplugin/kubelet_client.h"
#include "deviceplugin/plugin_supervisor.h"

namespace gpu_agent::deviceplugin {

void PluginSupervisor::PublishStatus() {
  std::vector<StatusEntry> entries;
  for (const auto& slot : slots_) {
    StatusEntry e;
    e.status.resource_name = slot->runtime.publisher->resource_name();
    e.status.serving = slot->server != nullptr;
    e.status.socket_path = slot->server ? slot->server->socket_path() : "";
    e.status.registered = slot->registered;
    e.status.registrations = slot->registrations;
    e.status.stream_heals = slot->stream_heals;
    e.service = slot->service;
    e.streamless = slot->streamless_since != std::chrono::steady_clock::time_point{};
    e.last_good = std::max(slot->streamless_since, slot->last_registered);
    entries.push_back(std::move(e));
  }
  std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(entries);
}

std::vector<ResourceStatus> PluginSupervisor::Status() const {
  // The services are asked without mu_ held: a stream ending takes its own
  // lock, then (through the observer) mu_.
  std::vector<StatusEntry> entries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries = status_;
  }
  std::vector<ResourceStatus> out;
  for (const StatusEntry& e : entries) {
    ResourceStatus st = e.status;
    if (e.service) {
      st.open_streams = e.service->OpenStreams();
      st.allocate_calls = e.service->stats().allocate_calls.load();
      st.allocate_errors = e.service->stats().allocate_errors.load();
      st.preferred_calls = e.service->stats().preferred_calls.load();
      for (const auto& b : e.service->stats().allocate_latency_buckets) {
        st.allocate_latency_buckets.push_back(b.load());
      }
      st.allocate_latency_ns_sum = e.service->stats().allocate_latency_ns_sum.load();
    }
    out.push_back(std::move(st));
  }
  return out;
}

bool PluginSupervisor::Alive(std::chrono::milliseconds timeout, std::string* why) const {
  {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    for (const StatusEntry& e : status_) {
      // Not serving counts as no stream: a socket that cannot be served
      // again for this long needs a restart too.
      if (!e.streamless || now - e.last_good < options_.stream_lost_limit) {
        continue;
      }
      *why =
          StrCat(e.status.resource_name, " has had no ListAndWatch stream and no registration for ",
                 std::chrono::duration_cast<std::chrono::seconds>(now - e.last_good).count(), " s");
      return false;
    }
  }
  for (const ResourceStatus& r : Status()) {
    if (!r.serving) continue;  // being replaced, or failed to serve: readiness says so
    if (absl::Status s = ProbePlugin(r.socket_path, timeout); !s.ok()) {
      *why = std::string(s.message());
      return false;
    }
  }
  return true;
}

bool PluginSupervisor::Ready() const {
  for (const ResourceStatus& s : Status()) {
    if (!s.registered || s.open_streams == 0) return false;
  }
  return true;
}

}  // namespace gpu_agent::deviceplugin
