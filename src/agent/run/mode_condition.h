// The Node condition GpuAgentMode, for a node that moves between the device
// plugin and DRA (mode_switch.h): which mode serves its GPUs and, while it
// moves, what the other side still holds. `kubectl describe node` shows it:
//   GpuAgentMode True MovingToDra  dra mode; 2 GPU(s) still held by ...
//   GpuAgentMode True Dra          dra mode; every GPU is offered through DRA
// Reasons: DevicePlugin, Dra, MovingToDevicePlugin, MovingToDra.
//
// Written only once a move has begun (the modes call Set then), so a node
// that never moves is not written (RBAC: nodes/status patch, in the
// mode-handover component). Each Set is written by the condition's own
// thread, the latest only, retried with a backoff while the API server
// refuses; nothing that sets it waits on the API server.
#ifndef GPU_AGENT_AGENT_RUN_MODE_CONDITION_H_
#define GPU_AGENT_AGENT_RUN_MODE_CONDITION_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/config/config.h"
#include "apiserver/rest_client.h"

namespace gpu_agent {

class ModeCondition {
 public:
  // Null, saying why, without a node name or an API connection.
  static std::unique_ptr<ModeCondition> Create(const Config& config);
  ~ModeCondition();
  ModeCondition(const ModeCondition&) = delete;
  ModeCondition& operator=(const ModeCondition&) = delete;

  void Set(const std::string& reason, const std::string& message);
  // The same, but written only where the Node shows the condition already
  // (read first): an agent that starts in another mode than the one the
  // condition names (relabelled while it was down) puts it right, and a
  // node that never moved is still not written.
  void SetIfShown(const std::string& reason, const std::string& message);
  // Ends a write in flight and the thread.
  void Stop();

 private:
  ModeCondition(std::unique_ptr<apiserver::RestClient> rest, std::string node);
  void Want(const std::string& reason, const std::string& message, bool if_shown);
  // Whether the Node has the condition (false, saying why, when it cannot
  // be read).
  bool Shown(std::string* why);
  void Run();

  const std::unique_ptr<apiserver::RestClient> rest_;
  const std::string node_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;             // protected by mu_
  std::string reason_, message_;  // protected by mu_: wanted
  std::string transition_;        // protected by mu_: when the reason last changed
  bool if_shown_ = false;         // protected by mu_: the wanted one by SetIfShown
  uint64_t wanted_ = 0;           // protected by mu_: Set calls
  uint64_t written_ = 0;          // protected by mu_: of those, the last written
  std::thread thread_;            // started by the first Set
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_MODE_CONDITION_H_
