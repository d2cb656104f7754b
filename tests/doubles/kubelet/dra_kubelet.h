// A stand-in for the kubelet's DRA side, written from how the kubelet
// behaves (its plugin watcher and DRA manager): it watches the plugin
// registry folder; for each socket that appears it dials it and asks GetInfo
// (1 s deadline), takes a plugin of type DRAPlugin, picks the first version
// in the PLUGIN's list that it knows, and says so with
// NotifyRegistrationStatus (or refuses, with a reason). It then calls
// NodePrepareResources / NodeUnprepareResources in batches on the endpoint
// the plugin named, with the kubelet's 45 s deadline, on the version it
// picked, and can read the health stream where the plugin lists it. As the
// kubelet's DRAPluginManager (1.33+), a driver may have several plugins at
// once (a rolling update's old and new pods, each on sockets of its own):
// a second one on an endpoint already registered is refused, and calls go
// to the newest one whose connection is up, else the newest. A socket
// removed from the folder deregisters its plugin alone; Restart drops
// every connection and registers what is in the folder again;
// DropConnection breaks one plugin's connection, and the next call dials
// the endpoint again, as the kubelet's DRA plugin client does.
#ifndef GPU_AGENT_TESTS_DOUBLES_KUBELET_DRA_KUBELET_H_
#define GPU_AGENT_TESTS_DOUBLES_KUBELET_DRA_KUBELET_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dra/claim_handler.h"

namespace pluginregistration {
class PluginInfo;
}  // namespace pluginregistration

namespace gpu_agent::testing {

class DraKubelet {
 public:
  struct Options {
    std::string registry_dir;
    // The versions this kubelet knows, e.g. {"v1beta1.DRAPlugin"} for 1.32.
    std::vector<std::string> known_versions = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};
    // The health stream's versions it knows, the one it prefers first, as
    // the kubelet's pickHealthService: {"v1alpha1.DRAResourceHealth"} for
    // 1.34, whose kubelet knows only that one.
    std::vector<std::string> known_health_versions = {
        "v1.DRAResourceHealth", "v1beta1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"};
    // Non-empty: every registration is refused with this reason.
    std::string refuse_reason;
    std::chrono::milliseconds get_info_deadline{1000};
    std::chrono::milliseconds call_deadline{45000};
  };

  struct Plugin {
    std::string socket;          // the registration socket it was found on
    std::string name;            // the driver name
    std::string endpoint;        // the DRA socket
    std::string version;         // the DRA version picked ("v1.DRAPlugin")
    std::string health_version;  // the one picked ("v1.DRAResourceHealth"); "": none
    // Lists a health version this kubelet knows.
    bool health() const { return !health_version.empty(); }
    std::vector<std::string> supported_versions;
    // One connection to the endpoint for every call, as the kubelet keeps.
    std::shared_ptr<grpc::Channel> channel;
  };

  struct Health {
    std::string pool, device;
    bool healthy = false;
    std::string message;
  };

  explicit DraKubelet(Options options);
  ~DraKubelet();

  // Registers what is in the folder, then watches it. False on failure.
  bool Start();
  void Stop();
  // What a kubelet restart does to its DRA plugins: forgets them, then
  // registers again what the folder holds.
  bool Restart();

  // The plugin of `driver` calls go to, if any: the newest registered whose
  // connection is up, else the newest.
  std::optional<Plugin> plugin(const std::string& driver) const;
  // Every plugin registered for `driver`, oldest first.
  std::vector<Plugin> plugins(const std::string& driver) const;
  bool WaitForPlugin(const std::string& driver,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  int registrations() const;  // GetInfo answered and accepted
  int refusals() const;
  std::vector<std::string> errors() const;  // what went wrong talking to plugins

  // One batch on the registered plugin's endpoint and version. The status is
  // the call's; `out` gets the per-claim answers by UID.
  grpc::Status Prepare(const std::string& driver, const std::vector<dra::ClaimRef>& claims,
                       std::map<std::string, dra::PrepareOutcome>* out);
  grpc::Status Unprepare(const std::string& driver, const std::vector<dra::ClaimRef>& claims,
                         std::map<std::string, std::string>* out);
  // The CDI ids the kubelet hands a container whose resources.claims[]
  // entry names `request` of the claim answered `claim`, as its
  // ClaimInfo.cdiDevicesAsList: each device whose request names hold
  // `request` exactly, or that names none; an empty `request` (the
  // container takes the whole claim) takes every device.
  static std::vector<std::string> ContainerCdiIds(const dra::PrepareOutcome& claim,
                                                  const std::string& request);
  // What a broken connection does at the kubelet's side: every call in
  // flight to `driver` (prepare, unprepare, a health stream) ends
  // CANCELLED (the plugin sees it cancelled), the connection is let go
  // (closed once those calls are done), and the next call dials the
  // endpoint anew. False when `driver` is not registered.
  bool DropConnection(const std::string& driver);
  int dropped_calls() const;  // calls in flight that DropConnection ended

  // Opens NodeWatchResources, on the health version picked, and waits for
  // the first message (or `timeout`).
  grpc::Status FirstHealth(const std::string& driver, std::vector<Health>* out,
                           std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Keeps NodeWatchResources open on a thread of its own, as the kubelet
  // does, until the stream ends (a DropConnection ends it) or
  // StopHealthWatch; one watch at a time. False when `driver` serves no
  // health.
  bool WatchHealth(const std::string& driver);
  void StopHealthWatch();
  int health_lists() const;                              // lists the watch has read
  std::vector<Health> last_health() const;               // the last of them
  std::optional<grpc::Status> health_watch_end() const;  // set once the stream ended

 private:
  void Watch();
  // Registers the plugin at `socket`: one attempt on the caller's thread,
  // the retries on one of their own (RegisterLater: all of it there).
  void Register(const std::string& socket);
  void RegisterLater(const std::string& socket);
  void RegisterWithRetries(const std::string& socket, int attempt);
  bool GetInfo(const std::string& socket, pluginregistration::PluginInfo* info);
  // The rest of a registration once GetInfo answered `info`.
  void Complete(const std::string& socket, const pluginregistration::PluginInfo& info);
  void Forget(const std::string& socket);
  void ScanFolder();
  // Keeps `ctx` in calls_ while a call to `driver` uses it.
  class Tracked;

  const Options options_;
  int inotify_fd_ = -1;
  int wake_fd_ = -1;
  std::thread watcher_;
  std::mutex workers_mu_;
  std::vector<std::thread> workers_;  // protected by workers_mu_: registrations

  mutable std::mutex mu_;
  // By driver name, in the order they registered.
  std::map<std::string, std::vector<Plugin>> plugins_;  // protected by mu_
  int registrations_ = 0;                               // protected by mu_
  int refusals_ = 0;                                    // protected by mu_
  std::vector<std::string> errors_;                     // protected by mu_
  std::map<grpc::ClientContext*, std::string> calls_;   // protected by mu_: in flight, by driver
  int dropped_calls_ = 0;                               // protected by mu_
  std::thread health_watch_;
  grpc::ClientContext* health_watch_ctx_ = nullptr;  // protected by mu_: while it reads
  bool health_watch_stopping_ = false;               // protected by mu_
  int health_lists_ = 0;                             // protected by mu_
  std::vector<Health> last_health_;                  // protected by mu_
  std::optional<grpc::Status> health_watch_end_;     // protected by mu_
};

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_DOUBLES_KUBELET_DRA_KUBELET_H_
