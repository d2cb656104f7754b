// The GPUs that running pods still hold through the device plugin after the
// node moved to DRA mode, read from the kubelet's PodResources API
// (podresources/pod_resources.h) until none is: DRA mode keeps them out of
// its slices and refuses claims for them meanwhile (DraHealth::SetWithheld).
//
// The watch asks once at once, then every `interval` while anything is held,
// and ends (reporting an empty set) once nothing is, two answers an interval
// apart saying so (a kubelet that has just started may answer before it
// knows its pods). When PodResources cannot be read, every GPU is reported
// held, "state unknown", and the watch goes on asking, since a GPU of
// unknown state is never offered; but for a DRA start with no handover on
// record (not `strict`) on a node with no PodResources socket at all, which
// holds nothing known: nothing is held and the watch ends.
#ifndef GPU_AGENT_AGENT_RUN_HELD_WATCH_H_
#define GPU_AGENT_AGENT_RUN_HELD_WATCH_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "agent/plan/device_model.h"
#include "nvml/inventory.h"

namespace gpu_agent {

struct HeldWatchOptions {
  std::string socket;  // the kubelet's PodResources socket
  std::chrono::milliseconds interval = std::chrono::seconds(2);
  std::chrono::milliseconds deadline = std::chrono::seconds(5);  // one List
  bool strict = false;
};

// What the watch saw last.
struct HeldState {
  // GPU UUID -> who holds it ("device-plugin pods ml/a, ml/b").
  std::map<std::string, std::string> holders;
  std::string problem;  // why PodResources could not be read; "" when it was
  bool done = false;    // nothing held any more: the watch has ended
};

class HeldWatch {
 public:
  // Called on the watch's thread with each change of what it saw.
  using Report = std::function<void(const HeldState&)>;

  // Starts the watch of `model`'s GPUs: the first List and its report are
  // made on the caller's thread, before Start returns (so what is offered
  // first already leaves the held GPUs out); the watch's thread asks again
  // while anything is held.
  static std::unique_ptr<HeldWatch> Start(HeldWatchOptions options, const DeviceModel& model,
                                          const nvml::Inventory& inventory, Report report);
  ~HeldWatch();
  HeldWatch(const HeldWatch&) = delete;
  HeldWatch& operator=(const HeldWatch&) = delete;

  // Ends the watch (after a List in flight, bounded by its deadline); no
  // report after it returns.
  void Stop();
  HeldState state() const;
  bool strict() const { return options_.strict; }

 private:
  HeldWatch(HeldWatchOptions options, const DeviceModel& model, const nvml::Inventory& inventory,
            Report report);
  void Run();
  // One List. `seen_held`: some GPU was held once in this watch.
  HeldState Look(bool seen_held) const;

  const HeldWatchOptions options_;
  const DeviceModel model_;
  const nvml::Inventory inventory_;
  const Report report_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;       // protected by mu_
  HeldState state_;         // protected by mu_
  bool seen_held_ = false;  // protected by mu_
  std::thread thread_;
};

// For each GPU `held` names, who holds it: "<one> ml/a", or "<many> ml/a,
// ml/b" ("device-plugin pod", "device-plugin pods").
std::map<std::string, std::string> HoldersOf(
    const std::map<std::string, std::set<std::string>>& held, std::string_view one,
    std::string_view many);
// "GPU-a (device-plugin pod ml/a); GPU-b (...)": for logs and /readyz.
std::string DescribeHolders(const std::map<std::string, std::string>& holders);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_HELD_WATCH_H_
