// A stand-in for the kubelet's device-manager side: serves Registration on
// <dir>/kubelet.sock, and for every plugin that registers, dials its socket,
// asks GetDevicePluginOptions and keeps one ListAndWatch stream, recording
// every device list. Tests call Allocate / GetPreferredAllocation through it
// and restart it like a real kubelet (which deletes every socket in its dir).
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

namespace gpu_agent::testing {

class KubeletSimulator {
 public:
  struct Update {
    std::chrono::steady_clock::time_point at;
    std::vector<v1beta1::Device> devices;
  };

  explicit KubeletSimulator(std::string dir);
  ~KubeletSimulator();

  // Serves Registration on <dir>/kubelet.sock. Returns false on failure.
  bool Start();
  // Stops serving and drops every plugin connection.
  void Stop();
  // Stop, delete every socket in the folder, Start: what a kubelet restart does.
  bool Restart();

  // From now on Register answers with this error (empty: accept again).
  void RefuseRegistrations(const std::string& message);

  std::string dir() const { return dir_; }
  std::string socket() const { return dir_ + "/kubelet.sock"; }

  int registrations() const;
  std::vector<v1beta1::RegisterRequest> registration_requests() const;
  bool WaitForRegistrations(int count,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // The latest device list of `resource` (empty before the first message).
  std::vector<v1beta1::Device> Devices(const std::string& resource) const;
  std::vector<Update> Updates(const std::string& resource) const;
  // Waits until the latest list of `resource` satisfies `pred`.
  bool WaitForDevices(const std::string& resource,
                      const std::function<bool(const std::vector<v1beta1::Device>&)>& pred,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Waits until `resource` has sent at least `count` device lists.
  bool WaitForUpdateCount(const std::string& resource, size_t count,
                          std::chrono::milliseconds timeout);
  v1beta1::DevicePluginOptions Options(const std::string& resource) const;

  grpc::Status Allocate(const std::string& resource, const v1beta1::AllocateRequest& req,
                        v1beta1::AllocateResponse* resp);
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
  struct Plugin {
    std::string endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::ClientContext> stream_ctx;
    std::thread reader;
    v1beta1::DevicePluginOptions options;
    std::vector<Update> updates;
  };
  void OnRegistered(const v1beta1::RegisterRequest& req);
  void DropPlugins();

  const std::string dir_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::string refuse_;
  std::vector<v1beta1::RegisterRequest> requests_;
  std::map<std::string, std::shared_ptr<Plugin>> plugins_;  // by resource name
};

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_KUBELET_SIM_KUBELET_SIMULATOR_H_
