// Keeps every resource served and registered with the kubelet: starts the
// servers, registers once serving, retries with backoff while the kubelet is
// away, and re-serves and re-registers when the kubelet restarts (a new
// kubelet.sock) or a plugin socket is removed, as seen by the SocketWatcher.
// One control thread does all of it; callers only post requests.
#ifndef GPU_AGENT_DEVICEPLUGIN_PLUGIN_SUPERVISOR_H_
#define GPU_AGENT_DEVICEPLUGIN_PLUGIN_SUPERVISOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/device_publisher.h"
#include "deviceplugin/plugin_server.h"
#include "deviceplugin/socket_watcher.h"

namespace gpu_agent::deviceplugin {

struct SupervisorOptions {
  std::string kubelet_socket = "/var/lib/kubelet/device-plugins/kubelet.sock";
  std::chrono::milliseconds register_timeout{5000};
  std::chrono::milliseconds retry_initial{200};
  std::chrono::milliseconds retry_max{30000};
  std::chrono::milliseconds stop_deadline{2000};
};

struct ResourceRuntime {
  std::shared_ptr<DevicePublisher> publisher;
  std::shared_ptr<const Allocator> allocator;
};

struct ResourceStatus {
  std::string resource_name;
  std::string socket_path;
  bool serving = false;
  bool registered = false;
  uint64_t registrations = 0;
  size_t open_streams = 0;
  uint64_t allocate_calls = 0;
  uint64_t allocate_errors = 0;
  uint64_t preferred_calls = 0;
  std::vector<uint64_t> allocate_latency_buckets;  // per ServiceStats::kBucketsUs, then +Inf
  uint64_t allocate_latency_ns_sum = 0;
};

class PluginSupervisor {
 public:
  // Serves every resource (an error here, such as a socket folder that does
  // not exist, is returned), then starts the watcher and the control thread,
  // which registers.
  static absl::StatusOr<std::unique_ptr<PluginSupervisor>> Start(
      SupervisorOptions options, std::vector<ResourceRuntime> resources);
  ~PluginSupervisor();  // Stop()

  // Replaces the resources: stops the old servers, serves the new ones and
  // registers them. Returns once done.
  absl::Status Reload(std::vector<ResourceRuntime> resources);

  // Finishes streams, stops servers, removes sockets, stops threads.
  void Stop();

  std::vector<ResourceStatus> Status() const;
  uint64_t kubelet_restarts() const { return kubelet_restarts_.load(); }
  // Every resource registered and streaming to the kubelet.
  bool Ready() const;
  // Every server that should be serving answers a call over its socket
  // within `timeout`; `why` names the first that does not.
  bool Alive(std::chrono::milliseconds timeout, std::string* why) const;

 private:
  struct Slot {
    ResourceRuntime runtime;
    std::shared_ptr<DevicePluginService> service;
    std::unique_ptr<PluginServer> server;
    bool registered = false;
    uint64_t registrations = 0;
    std::chrono::steady_clock::time_point next_try{};
    std::chrono::milliseconds backoff{0};
    int failures = 0;
    std::string last_error;
  };
  enum class EventKind { kKubeletSocket, kSocketDeleted, kReload };
  struct Event {
    EventKind kind;
    std::string name;
  };

  explicit PluginSupervisor(SupervisorOptions options) : options_(std::move(options)) {}
  std::string SocketPath(const std::string& endpoint) const;
  absl::Status Serve(Slot& slot);
  void ControlLoop();
  void TryRegister(Slot& slot);
  void HandleEvent(const Event& e);
  void Post(Event e);
  // Copies what Status() reports. Control thread only (or before it starts).
  void PublishStatus();

  const SupervisorOptions options_;
  std::string folder_;
  std::string kubelet_name_;
  std::unique_ptr<SocketWatcher> watcher_;
  std::thread control_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;  // protected by mu_
  bool stopping_ = false;     // protected by mu_
  // Touched only by the control thread once it runs (and by Start/Stop
  // before and after it).
  std::vector<std::unique_ptr<Slot>> slots_;
  struct StatusEntry {
    ResourceStatus status;
    std::shared_ptr<DevicePluginService> service;
  };
  std::vector<StatusEntry> status_;              // protected by mu_
  std::vector<ResourceRuntime> pending_reload_;  // protected by mu_
  bool reload_done_ = false;                     // protected by mu_
  absl::Status reload_status_;                   // protected by mu_
  bool stopped_ = false;
  std::atomic<uint64_t> kubelet_restarts_{0};
  bool ever_registered_ = false;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_PLUGIN_SUPERVISOR_H_
