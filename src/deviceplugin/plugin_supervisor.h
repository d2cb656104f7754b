// Keeps every resource served and registered with the kubelet: starts the
// servers, registers once serving, retries with backoff while the kubelet is
// away, and re-serves and re-registers when the kubelet restarts (a new
// kubelet.sock) or a plugin socket is removed, as seen by the SocketWatcher,
// or when a registered resource is left without a ListAndWatch stream (a
// kubelet since 1.25 drops the current client of a name when any older
// client's stream ends). One thread does all of it: the supervisor's own
// control thread, or (own_thread off) the thread that drives it as a
// PollDriven, as `run`'s main thread does beside its signals. Register, which
// a kubelet may hold for seconds, runs on a short-lived thread of its own and
// reports back as an event, so neither a stop nor a signal waits behind it.
#ifndef GPU_AGENT_DEVICEPLUGIN_PLUGIN_SUPERVISOR_H_
#define GPU_AGENT_DEVICEPLUGIN_PLUGIN_SUPERVISOR_H_

#include <sys/types.h>

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
#include "base/backoff.h"
#include "base/poll_driven.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/device_publisher.h"
#include "deviceplugin/kubelet_client.h"
#include "deviceplugin/plugin_server.h"
#include "deviceplugin/socket_watcher.h"

namespace gpu_agent::deviceplugin {

struct SupervisorOptions {
  std::string kubelet_socket = "/var/lib/kubelet/device-plugins/kubelet.sock";
  // Covers a kubelet since 1.25 dialing the plugin back (up to 10 s) and
  // asking its options inside Register.
  std::chrono::milliseconds register_timeout{30000};
  std::chrono::milliseconds retry_initial{200};
  std::chrono::milliseconds retry_max{30000};
  std::chrono::milliseconds stop_deadline{2000};
  // A registered resource with no ListAndWatch stream for this long, while
  // kubelet.sock is there, is served on a fresh socket and registered again.
  std::chrono::milliseconds stream_grace{1000};
  // After a generation's streams end (reload, a removed socket, a re-serve),
  // the next registration waits this long, so the kubelet has dropped the
  // old client before the new one is current.
  std::chrono::milliseconds settle{200};
  // Alive() fails when a resource has had neither a stream nor a successful
  // registration for this long.
  std::chrono::milliseconds stream_lost_limit{120000};
  // Off only in tests that drive CheckSockets() by hand.
  bool watch_folder = true;
  // Off: no control thread; one thread polls Descriptors(), calls Turn() and
  // makes every other call (Reload, CheckSockets, Stop) itself.
  bool own_thread = true;
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
  // Registrations again because the kubelet held no stream (see stream_grace).
  uint64_t stream_heals = 0;
  size_t open_streams = 0;
  uint64_t allocate_calls = 0;
  uint64_t allocate_errors = 0;
  uint64_t preferred_calls = 0;
  std::vector<uint64_t> allocate_latency_buckets;  // per ServiceStats::kBucketsUs, then +Inf
  uint64_t allocate_latency_ns_sum = 0;
};

class PluginSupervisor : public PollDriven {
 public:
  // Serves every resource (an error here, such as a socket folder that does
  // not exist, is returned), then starts the watcher and, with own_thread,
  // the control thread, which registers (else the first Turn does).
  static absl::StatusOr<std::unique_ptr<PluginSupervisor>> Start(
      SupervisorOptions options, std::vector<ResourceRuntime> resources);
  ~PluginSupervisor() override;  // Stop()

  // Replaces the resources: stops the old servers, serves the new ones and
  // registers them. Returns once done.
  absl::Status Reload(std::vector<ResourceRuntime> resources);

  // Finishes streams, stops servers, removes sockets, stops threads (a
  // Register in flight is cancelled).
  void Stop();

  // PollDriven, for own_thread off: the wake-up eventfd and the socket
  // folder's inotify descriptor; Turn handles what they say and what is due.
  std::vector<int> Descriptors() const override;
  TimePoint Turn() override;

  // Checks the kubelet's socket and every plugin socket against what was
  // last seen, as after lost inotify events: a changed kubelet.sock is a
  // kubelet restart, a changed plugin socket is served again. Returns once
  // done.
  void CheckSockets();

  std::vector<ResourceStatus> Status() const;
  uint64_t kubelet_restarts() const { return kubelet_restarts_.load(); }
  // Every resource registered and streaming to the kubelet.
  bool Ready() const;
  // Every server that should be serving answers a call over its socket
  // within `timeout`, and no resource has gone stream_lost_limit without a
  // stream or a registration; `why` names the first that fails.
  bool Alive(std::chrono::milliseconds timeout, std::string* why) const;

 private:
  struct Slot {
    Slot(uint64_t slot_id, ResourceRuntime resource, const SupervisorOptions& o);
    uint64_t id = 0;  // names it to a Register that reports back
    // Bumped whenever what a Register in flight was for is gone (a fresh
    // socket, a new kubelet): its answer is then stale.
    uint64_t attempt = 0;
    ResourceRuntime runtime;
    std::shared_ptr<DevicePluginService> service;
    std::unique_ptr<PluginServer> server;
    bool registered = false;
    uint64_t registrations = 0;
    std::chrono::steady_clock::time_point next_try{};
    // Waits between failed registrations: retry_initial, doubling to
    // retry_max; over on a fresh socket, a registration, a new kubelet.
    Backoff register_retries;
    int failures = 0;
    std::string last_error;
    std::chrono::steady_clock::time_point last_registered{};
    // A failed Serve (no server) is tried again then, with backoff as for
    // registrations; over once served.
    std::chrono::steady_clock::time_point next_serve{};
    Backoff serve_retries;
    // When the resource was last seen with no stream open; zero while one is.
    std::chrono::steady_clock::time_point streamless_since{};
    // The service's streams_opened count before the last registration.
    uint64_t streams_before_register = 0;
    uint64_t stream_heals = 0;
    // The grace before the next heal (0: stream_grace): stream_grace,
    // doubled (to retry_max, or no further when stream_grace is longer; not
    // jittered) while heals bring no stream.
    std::chrono::milliseconds grace{0};
    Backoff graces;
  };
  // What identifies a file at a path: a new file may reuse an inode number,
  // not also its change time.
  struct FileIdentity {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t ctime_ns = 0;
    bool operator==(const FileIdentity& o) const {
      return dev == o.dev && ino == o.ino && ctime_ns == o.ctime_ns;
    }
  };
  enum class EventKind { kKubeletSocket, kSocketDeleted, kReload, kStreams, kRescan, kRegistered };
  struct Event {
    Event(EventKind k, std::string n) : kind(k), name(std::move(n)) {}
    EventKind kind;
    std::string name;
    // kRegistered: the kubelet's answer, for which slot and attempt, and
    // the slot's streams_opened count when the call started.
    absl::Status status;
    uint64_t slot_id = 0;
    uint64_t attempt = 0;
    uint64_t streams_opened = 0;
    FileIdentity kubelet;  // the kubelet's socket when the call went out
  };

  explicit PluginSupervisor(SupervisorOptions options) : options_(std::move(options)) {}
  std::string SocketPath(const std::string& endpoint) const;
  // Serves the slot on a fresh socket. `settle`: the old server had streams
  // the kubelet must see end before the next registration.
  absl::Status Serve(Slot& slot, bool settle);
  void ControlLoop();
  // Starts Register for `slot` on the register thread; its answer comes back
  // as a kRegistered event (FinishRegister). One at a time.
  void StartRegister(Slot& slot);
  void FinishRegister(const Event& e);
  // Cancels the Register in flight when its slot was replaced or served
  // again meanwhile (its answer would be ignored).
  void CancelStaleRegister();
  // Cancels the Register call in flight, if any (mu_ not held).
  void CancelRegisterCall();
  // Registered, but the kubelet holds no stream: register again.
  void Heal(Slot& slot);
  // Notes which slots have a stream open; true if anything changed.
  bool RefreshStreams(std::chrono::steady_clock::time_point now);
  static bool IdentityOf(const std::string& path, FileIdentity* out);
  void HandleEvent(const Event& e);
  // Queues an event for the control thread and wakes it.
  void Post(Event e);
  void Wake();
  // A change in the socket folder, as an event (control thread).
  void OnFolderChange(const std::string& name, SocketWatcher::Change change);
  // Blocks the control thread until an event is posted, the folder changes
  // or `next` comes: one poll(2) over the wake eventfd and the inotify fd.
  void WaitForWork(std::chrono::steady_clock::time_point next);
  // Reads the wake eventfd and the folder's changes, without blocking.
  void DrainDescriptors();
  // Copies what Status() reports. Control thread only (or before it starts).
  void PublishStatus();

  const SupervisorOptions options_;
  std::string folder_;
  std::string kubelet_name_;
  std::unique_ptr<SocketWatcher> watcher_;  // polled by the control thread
  int wake_fd_ = -1;                        // eventfd: Post and Stop wake the control thread
  std::thread control_;                     // own_thread only
  std::thread register_thread_;             // the Register in flight, or the last one
  bool registering_ = false;                // a Register is in flight (driving thread)
  uint64_t next_slot_id_ = 1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;  // protected by mu_
  bool stopping_ = false;     // protected by mu_
  // Touched only by the thread that turns it, the control thread or its
  // driver (and by Start/Stop before and after).
  std::vector<std::unique_ptr<Slot>> slots_;
  struct StatusEntry {
    ResourceStatus status;
    std::shared_ptr<DevicePluginService> service;
    std::chrono::steady_clock::time_point last_good{};  // a stream or a registration
    bool streamless = false;
  };
  std::vector<StatusEntry> status_;              // protected by mu_
  std::vector<ResourceRuntime> pending_reload_;  // protected by mu_
  bool reload_done_ = false;                     // protected by mu_
  uint64_t rescans_done_ = 0;                    // protected by mu_
  absl::Status reload_status_;                   // protected by mu_
  bool stopped_ = false;
  std::atomic<uint64_t> kubelet_restarts_{0};
  bool ever_registered_ = false;
  FileIdentity kubelet_identity_;  // the kubelet registered with or being registered with
  // The Register in flight's (or the last one's); protected by mu_, which
  // Stop takes to cancel it from another thread.
  std::shared_ptr<CallCanceller> register_call_;
  uint64_t registering_slot_ = 0;  // the slot and attempt of the Register in flight
  uint64_t registering_attempt_ = 0;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_PLUGIN_SUPERVISOR_H_
