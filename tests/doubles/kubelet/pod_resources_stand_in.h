// A stand-in for the kubelet's PodResources API (v1): List and
// GetAllocatableResources answered from a table of what each pod's
// containers hold, which a test (or the kubelet stand-in's device manager
// and DRA side) fills as it hands devices out, and empties as pods end.
// As the kubelet, it lists running pods with their containers even when
// they hold nothing, and a device-plugin resource's devices per container.
//
// For the agent's refusals it can also answer every call with an error,
// hold every call until released (a kubelet that does not answer), or
// answer bytes that are no PodResources message.
#ifndef GPU_AGENT_TESTS_DOUBLES_KUBELET_POD_RESOURCES_STAND_IN_H_
#define GPU_AGENT_TESTS_DOUBLES_KUBELET_POD_RESOURCES_STAND_IN_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpu_agent::testing {

class PodResourcesStandIn {
 public:
  enum class Answer {
    kTable,    // what the table holds
    kError,    // the status set by FailWith
    kHold,     // nothing until Release (or Stop)
    kGarbage,  // bytes that are no ListPodResourcesResponse
  };

  // Serves on `socket` once started (its folder must exist).
  explicit PodResourcesStandIn(std::string socket);
  ~PodResourcesStandIn();

  bool Start();
  void Stop();  // answers every held call CANCELLED first
  const std::string& socket() const { return socket_; }

  // `container` of pod `ns`/`pod` holds `ids` of device-plugin `resource`
  // (added to what it held).
  void Hold(const std::string& ns, const std::string& pod, const std::string& container,
            const std::string& resource, const std::vector<std::string>& ids);
  // `container` uses `device` of claim `claim_ns`/`claim`, prepared by
  // `driver` from `pool`; `share_id` "" when not shared.
  void HoldClaimDevice(const std::string& ns, const std::string& pod, const std::string& container,
                       const std::string& claim_ns, const std::string& claim,
                       const std::string& driver, const std::string& pool,
                       const std::string& device, const std::string& share_id = "");
  // The pod ended: it is listed no more.
  void EndPod(const std::string& ns, const std::string& pod);
  // GetAllocatableResources' devices of `resource`.
  void SetAllocatable(const std::string& resource, const std::vector<std::string>& ids);

  void SetAnswer(Answer answer);
  void FailWith(grpc::Status status);  // and SetAnswer(kError)
  void Release();                      // held calls answer from the table
  int list_calls() const;
  int held_calls() const;  // waiting now

  class Service;
  class GarbageService;

 private:
  struct ClaimDevice {
    std::string claim_ns, claim, driver, pool, device, share_id;
  };
  struct Container {
    std::map<std::string, std::vector<std::string>> devices;  // by resource
    std::vector<ClaimDevice> claim_devices;
  };
  using Pod = std::map<std::string, Container>;  // by container name

  const std::string socket_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<GarbageService> garbage_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Pod> pods_;  // by (namespace, name)
  std::map<std::string, std::vector<std::string>> allocatable_;
  Answer answer_ = Answer::kTable;
  grpc::Status fail_with_;
  int list_calls_ = 0;
  struct Held {
    grpc::ServerUnaryReactor* reactor;
    void* response;  // the ListPodResourcesResponse to fill
  };
  std::vector<Held> held_;

  void FillLocked(void* response) const;
  bool StartLocked();
};

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_DOUBLES_KUBELET_POD_RESOURCES_STAND_IN_H_
