// The kubelet's side of a DRA driver on this node: the plugin-registration
// service on <registry_dir>/<driver>-reg.sock, and the DRA service (v1 and
// v1beta1) with its health stream (v1, v1beta1 and v1alpha1) on
// <plugin_dir>/<driver>/dra.sock. Claims go to a ClaimHandler; health comes
// from SetHealth.
//
// A socket someone removes (or replaces) is served again at once, so the
// kubelet's plugin watcher registers the plugin anew.
//
// Both sockets are served on the agent's one gRPC server model
// (grpcserver::CqServer). The parts: registration (dra_registration), the
// DRA service and its claims thread (dra_plugin_service), the health stream
// (health_stream); here, their sockets' upkeep.
#ifndef GPU_AGENT_DRA_DRA_SERVER_H_
#define GPU_AGENT_DRA_DRA_SERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dra/claim_handler.h"

namespace gpu_agent::dra {

struct DraServerOptions {
  std::string driver_name;   // a DNS subdomain, e.g. gpu.gpu-agent.github.io
  std::string registry_dir;  // the kubelet's plugins_registry folder
  std::string plugin_dir;    // the kubelet's plugins folder
  // This instance's name in its sockets' names: the pod UID in a rolling
  // update, where the kubelet (1.33+) registers the new pod's sockets
  // beside the old one's; empty: the plain names, one instance a node.
  std::string instance = "";
  // While a health stream is open, the current list is sent again this long
  // after the last: the kubelet takes a device it has heard nothing of for
  // 30 s as of unknown health. No stream open, no wake-up.
  std::chrono::milliseconds health_resend{10000};
};

// <registry_dir>/<driver>-reg.sock and <plugin_dir>/<driver>/dra.sock; with
// an instance, <driver>-<tag>-reg.sock and dra-<tag>.sock (the names the
// kubelet plugin helper's RollingUpdate gives them), the tag being the
// instance, or its first 8 characters where the whole would make a path
// longer than gRPC binds (kMaxSocketPath: a long driver name or folder).
std::string InstanceTag(const DraServerOptions& o);
std::string RegistrationSocketPath(const DraServerOptions& o);
std::string PluginSocketPath(const DraServerOptions& o);

// What GetInfo lists: the DRA versions in the order the kubelet should
// prefer them (it takes the first it knows): v1, v1beta1; then the health
// stream's, of which it takes the newest it knows.
const std::vector<std::string>& SupportedVersions();

// A device's health as the health stream reports it.
struct DeviceHealthRecord {
  std::string pool;
  std::string device;
  bool healthy = true;
  std::string message;  // why it is unhealthy; the kubelet keeps 1,024 characters
};

// What the kubelet has said about the registration.
struct RegistrationState {
  bool registered = false;     // the last NotifyRegistrationStatus said yes
  uint64_t info_calls = 0;     // GetInfo calls
  uint64_t registrations = 0;  // NotifyRegistrationStatus: registered
  uint64_t refusals = 0;       // NotifyRegistrationStatus: refused
  std::string last_refusal;    // the kubelet's reason, last refusal
};

struct ClaimCallStats {
  uint64_t prepare_calls = 0;
  uint64_t unprepare_calls = 0;
  uint64_t claim_errors = 0;    // claims answered with an error, both calls
  size_t health_streams = 0;    // open NodeWatchResources streams
  uint64_t health_resends = 0;  // lists sent again with no change (the heartbeat)
  uint64_t socket_heals = 0;    // sockets someone removed, served again
};

class DraServer {
 public:
  // Serves the DRA socket (creating <plugin_dir>/<driver>/), then the
  // registration socket, so the kubelet finds the service it is told of.
  // Errors name the socket and why (folder missing, path too long, served by
  // another process).
  static absl::StatusOr<std::unique_ptr<DraServer>> Start(const DraServerOptions& options,
                                                          std::shared_ptr<ClaimHandler> handler);
  ~DraServer();
  DraServer(const DraServer&) = delete;
  DraServer& operator=(const DraServer&) = delete;

  // Removes the registration socket first (the kubelet stops calling), ends
  // the health streams, lets the prepare in progress finish (batches not
  // started are answered UNAVAILABLE, which the kubelet retries), waits up to
  // `deadline` for the calls in flight, and removes the DRA socket.
  void Stop(std::chrono::milliseconds deadline = std::chrono::seconds(2));

  // Replaces the devices the health stream reports; streams open get the
  // new list.
  void SetHealth(std::vector<DeviceHealthRecord> devices);
  // Whether this instance serves the health stream (the default): another
  // instance of the driver on the node serves it while this one does not,
  // and the streams open are ended, new ones refused UNAVAILABLE (the
  // kubelet asks again every 5 s).
  void SetHealthServing(bool serving);

  RegistrationState registration() const;
  // Waits up to `within` for the kubelet to take the registration.
  bool WaitRegistered(std::chrono::milliseconds within) const;
  ClaimCallStats stats() const;
  const std::string& registration_socket() const;
  const std::string& plugin_socket() const;

  class Impl;

 private:
  explicit DraServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_DRA_SERVER_H_
