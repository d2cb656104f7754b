// A stand-in for the kubelet's device-manager side: serves Registration on
// <dir>/kubelet.sock, talks to every plugin that registers, records every
// device list, and restarts like a real kubelet (which deletes every socket
// in its dir). Two profiles, each following the kubelet's own
// pkg/kubelet/cm/devicemanager code of those versions:
//  - "1.25" (default; 1.25 to at least 1.34): Register is synchronous: inside
//    the call the kubelet dials the plugin (blocking, 10 s) and asks
//    GetDevicePluginOptions, whose answer it uses (the options in the
//    request are ignored). One client per resource: a second registration
//    replaces the client without closing the old one, and when ANY client's
//    ListAndWatch stream ends, the kubelet disconnects whichever client is
//    current for the name, marking every device of the resource unhealthy
//    (kubernetes issues #121994, #127803).
//  - "1.20": Register returns at once; the kubelet then dials, opens the
//    stream, and closes the previous endpoint of the same name; only the end
//    of the current endpoint's stream marks the resource unhealthy.
// The profile comes from the constructor, else from KUBELET_SIM_PROFILE.
#ifndef GPU_AGENT_TESTS_KUBELET_SIM_KUBELET_SIMULATOR_H_
#define GPU_AGENT_TESTS_KUBELET_SIM_KUBELET_SIMULATOR_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/api.grpc.pb.h"
#include "pod_resources_stand_in.h"

namespace gpu_agent::testing {

class KubeletSimulator {
 public:
  enum class Profile { k1_20, k1_25 };
  // KUBELET_SIM_PROFILE ("1.20" or "1.25"; unset or empty: 1.25). Anything
  // else aborts the test program with a message.
  static Profile ProfileFromEnv();
  static const char* ProfileName(Profile p) { return p == Profile::k1_20 ? "1.20" : "1.25"; }

  struct Update {
    std::chrono::steady_clock::time_point at;
    std::vector<v1beta1::Device> devices;
  };

  explicit KubeletSimulator(std::string dir, Profile profile = ProfileFromEnv());
  ~KubeletSimulator();

  Profile profile() const { return profile_; }

  // Serves Registration on <dir>/kubelet.sock. Returns false on failure.
  bool Start();
  // Stops serving and drops every plugin connection and what it knew.
  void Stop();
  // Stop, delete every socket in the folder, Start: what a kubelet restart does.
  bool Restart();

  // From now on Register answers with this error (empty: accept again).
  void RefuseRegistrations(const std::string& message);
  // While held, Register calls wait (until released, or the caller cancels).
  void HoldRegistrations(bool hold);
  int held_registrations() const;
  // Register calls received, whatever became of them.
  int register_calls() const;
  // The most Register calls for one resource ever in flight at once.
  int max_concurrent_registrations() const;

  std::string dir() const { return dir_; }
  std::string socket() const { return dir_ + "/kubelet.sock"; }

  int registrations() const;
  std::vector<v1beta1::RegisterRequest> registration_requests() const;
  bool WaitForRegistrations(int count,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // The kubelet's view of `resource`: the latest device list any client of
  // it sent, every device Unhealthy once the resource was disconnected.
  // Empty before the first message.
  std::vector<v1beta1::Device> Devices(const std::string& resource) const;
  // What the Node's allocatable would say: healthy devices while a client is
  // connected, else 0.
  int Allocatable(const std::string& resource) const;
  // What the Node's capacity would say: every device the plugin listed,
  // healthy or not, while a client is connected and for the grace period
  // after the last one went (the kubelet's endpointStopGracePeriod, 5
  // minutes: its ManagerImpl.GetCapacity keeps a stopped endpoint's devices,
  // all unhealthy, until then); 0 after it, and before any client.
  int Capacity(const std::string& resource) const;
  bool WaitForCapacity(const std::string& resource, int count, std::chrono::milliseconds timeout);
  // The grace period above; tests shorten it.
  void SetEndpointStopGracePeriod(std::chrono::milliseconds grace);
  // Times the kubelet disconnected `resource` (its stream ended).
  int Disconnects(const std::string& resource) const;
  // The device lists the current client sent.
  std::vector<Update> Updates(const std::string& resource) const;
  // Waits until the kubelet's view of `resource` satisfies `pred`.
  bool WaitForDevices(const std::string& resource,
                      const std::function<bool(const std::vector<v1beta1::Device>&)>& pred,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool WaitForAllocatable(const std::string& resource, int count,
                          std::chrono::milliseconds timeout);
  // Waits until every client that is not current has seen its stream end
  // (so no late end can still drop the current one).
  bool WaitForOldClientsDone(std::chrono::milliseconds timeout);
  // Waits until the current client of `resource` has sent `count` lists.
  bool WaitForUpdateCount(const std::string& resource, size_t count,
                          std::chrono::milliseconds timeout);
  v1beta1::DevicePluginOptions Options(const std::string& resource) const;

  // The kubelet ends the current client's connection as it does when any
  // stream of the resource ends (1.25) or the endpoint stops (1.20): the
  // resource goes unhealthy until the plugin registers again.
  void DisconnectCurrent(const std::string& resource);

  // The device manager's admission check for a container that asks for
  // `ids` of `resource` (after a kubelet restart, pods are admitted again):
  // empty when admitted, else the UnexpectedAdmissionError message.
  std::string Admit(const std::string& resource, const std::vector<std::string>& ids) const;

  // What the kubelet hands the runtime for one container that got these
  // responses (one per resource): envs and annotations merged with the first
  // key winning (a conflict is noted), mounts and device specs by container
  // path, CDI devices de-duplicated by name (CRI CDIDevices, 1.31+).
  struct ContainerConfig {
    std::map<std::string, std::string> envs;
    std::map<std::string, std::string> annotations;
    std::vector<v1beta1::Mount> mounts;
    std::vector<v1beta1::DeviceSpec> devices;
    std::vector<std::string> cdi_devices;
    std::vector<std::string> conflicts;
  };
  static ContainerConfig MergeForContainer(
      const std::vector<v1beta1::ContainerAllocateResponse>& responses);

  grpc::Status Allocate(const std::string& resource, const v1beta1::AllocateRequest& req,
                        v1beta1::AllocateResponse* resp);

  // The kubelet's PodResources API (v1) on `socket`, answering from the
  // pods AdmitPod handed devices to, and GetAllocatableResources from the
  // device lists plugins sent. False when it cannot serve.
  bool ServePodResources(const std::string& socket);
  // Null before ServePodResources: for its failure modes.
  PodResourcesStandIn* pod_resources() { return pod_resources_.get(); }
  // What the device manager does for container `container` of pod
  // `ns`/`pod` asking for `ids` of `resource`: Allocate, and once the plugin
  // answered, the pod holds them (PodResources lists them) until EndPod.
  grpc::Status AdmitPod(const std::string& ns, const std::string& pod, const std::string& container,
                        const std::string& resource, const std::vector<std::string>& ids,
                        v1beta1::AllocateResponse* resp);
  // The pod ended: its devices are free and PodResources lists it no more.
  void EndPod(const std::string& ns, const std::string& pod);
  grpc::Status GetPreferredAllocation(const std::string& resource,
                                      const v1beta1::PreferredAllocationRequest& req,
                                      v1beta1::PreferredAllocationResponse* resp);
  grpc::Status GetDevicePluginOptions(const std::string& resource,
                                      v1beta1::DevicePluginOptions* resp);
  grpc::Status PreStartContainer(const std::string& resource,
                                 const v1beta1::PreStartContainerRequest& req);
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Stub(const std::string& resource);

  class RegistrationService;

 private:
  struct Client {
    std::string resource;
    std::string endpoint;
    std::shared_ptr<grpc::Channel> channel;
    grpc::ClientContext stream_ctx;
    std::thread reader;
    bool done = false;  // the reader returned; protected by mu_
    v1beta1::DevicePluginOptions options;
    std::vector<Update> updates;
  };
  struct View {
    std::vector<v1beta1::Device> devices;
    bool connected = false;
    int disconnects = 0;
    std::chrono::steady_clock::time_point stopped_at;  // the last disconnect
  };
  // REQUIRES: mu_ held.
  int CapacityLocked(const std::string& resource) const;
  grpc::Status OnRegister(const v1beta1::RegisterRequest& req);
  // Reads the client's stream into the view; what the kubelet does when it
  // ends depends on the profile.
  void RunClient(const std::shared_ptr<Client>& c);
  // REQUIRES: mu_ held.
  void MarkUnhealthyLocked(const std::string& resource);
  void JoinFinishedClients();
  void DropClients();

  const std::string dir_;
  const Profile profile_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::string refuse_;
  bool hold_ = false;
  int held_ = 0;
  int register_calls_ = 0;
  std::map<std::string, int> in_flight_;  // Register calls by resource
  int max_in_flight_ = 0;
  std::vector<v1beta1::RegisterRequest> requests_;
  std::map<std::string, std::shared_ptr<Client>> current_;  // by resource name
  std::map<std::string, View> views_;                       // by resource name
  std::chrono::milliseconds stop_grace_{std::chrono::minutes(5)};
  std::vector<std::shared_ptr<Client>> clients_;  // every client not yet joined
  std::unique_ptr<PodResourcesStandIn> pod_resources_;
};

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_KUBELET_SIM_KUBELET_SIMULATOR_H_
