// Shows GPU health where operators look on the Node: a Kubernetes Event on
// the Node for each transition (reasons GpuUnhealthy, GpuDegraded,
// GpuRecovered; message with the GPU's index, UUID, the check and its
// value), at most one per GPU and check a minute (a GPU that flaps within
// the minute gets one event for where it ended, none when it ended where it
// was), and a Node condition GpuHealthy: False naming the GPUs and checks
// while any is unhealthy or degraded, True otherwise.
//
// Events go to POST /api/v1/namespaces/<ns>/events (RBAC: events create),
// the condition by a strategic merge patch of nodes/<node>/status (RBAC:
// nodes/status patch), which merges conditions by type and leaves the
// kubelet's alone. A server that refuses either is logged once per answer
// code and the agent goes on; a condition not written is tried again.
//
// Knows nothing of NVML: the health watcher's reports arrive as plain
// GpuHealthNotes. Thread-safe: Note() is called from the health thread and
// never waits on the network; one thread of its own sends.
#ifndef GPU_AGENT_HEALTH_NODE_HEALTH_REPORTER_H_
#define GPU_AGENT_HEALTH_NODE_HEALTH_REPORTER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "apiserver/connection.h"
#include "apiserver/rest_client.h"
#include "base/clock.h"
#include "health/severity.h"

namespace gpu_agent::health {

// One GPU's standing on one check changed. `check` is a polled check's name,
// or "xid" for an XID (or lost-GPU) outage of the whole GPU.
struct GpuHealthNote {
  std::string uuid;
  int index = -1;  // the GPU's NVML index, -1 when unknown
  std::string check;
  Severity level = Severity::kOk;
  std::string value;  // what was judged, or the outage's reason
};

struct NodeHealthReporterOptions {
  std::string node;
  std::string event_namespace = "default";  // where the kubelet puts a Node's events too
  // At most one event per GPU and check this often.
  std::chrono::milliseconds event_interval{60000};
  // A condition the server did not take is tried again after this.
  std::chrono::milliseconds retry{10000};
  apiserver::RestOptions rest;
  const Clock* clock = Clock::Real();  // REQUIRES: outlives the reporter
};

struct NodeHealthReporterStats {
  uint64_t events_sent = 0;       // created (201)
  uint64_t events_refused = 0;    // any other answer, or none
  uint64_t events_coalesced = 0;  // transitions folded into a later event, or undone in time
  uint64_t condition_writes = 0;  // patches the server took
  uint64_t condition_errors = 0;
};

class NodeHealthReporter {
 public:
  // Starts the sending thread. It reads the Node once: a GpuHealthy
  // condition other than True there (an earlier agent's) is set right at
  // once; with none, nothing is written until a GPU's health changes.
  static absl::StatusOr<std::unique_ptr<NodeHealthReporter>> Start(
      apiserver::Connection connection, NodeHealthReporterOptions options);
  ~NodeHealthReporter();  // Stop()

  void Note(const GpuHealthNote& note);
  // Wakes the thread to look at the clock again (tests with a fake clock).
  void Wake();
  // Stops the thread and returns once it is joined: a request in flight is
  // cancelled. What it has not sent is dropped. Idempotent.
  void Stop();

  // Sending threads running now, in this process (tests: none after Stop()).
  static int ThreadsRunning();

  NodeHealthReporterStats stats() const;

  struct State;

 private:
  explicit NodeHealthReporter(std::unique_ptr<State> s);
  const std::unique_ptr<State> state_;
};

// The JSON bodies sent (exposed for tests): a core/v1 Event on the Node, and
// the strategic merge patch of the GpuHealthy condition. Times are RFC 3339.
std::string NodeEventJson(const std::string& node, const std::string& ns, const std::string& name,
                          const std::string& reason, const std::string& type,
                          const std::string& message, const std::string& now);
std::string GpuHealthyConditionPatch(bool healthy, const std::string& reason,
                                     const std::string& message, const std::string& now,
                                     const std::string& transition);

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_NODE_HEALTH_REPORTER_H_
