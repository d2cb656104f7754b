// What the main thread of `run` waits for: a signal (SIGTERM or SIGINT: stop;
// SIGHUP: reload; SIGUSR1: an operator vouching that GPUs held for a reset
// were reset) or a reload another thread asks for (the node's config label
// changed). One poll over a signalfd and an eventfd: an internal event is
// posted, never sent to the process as a signal. The same poll drives work
// that needs no thread of its own (plugin mode's supervisor, a PollDriven).
#ifndef GPU_AGENT_AGENT_RUN_RUN_EVENTS_H_
#define GPU_AGENT_AGENT_RUN_RUN_EVENTS_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/poll_driven.h"

namespace gpu_agent {

class RunEvents {
 public:
  enum class Kind { kStop, kReload, kVouch };
  struct Event {
    Kind kind;
    std::string reason;  // "SIGHUP", "SIGTERM", or what a poster said
  };

  // REQUIRES: the signals are blocked in every thread (BlockShutdownSignals),
  // so only this takes them.
  static absl::StatusOr<std::unique_ptr<RunEvents>> Create();
  ~RunEvents();
  RunEvents(const RunEvents&) = delete;
  RunEvents& operator=(const RunEvents&) = delete;

  // Thread-safe. Asks the main thread for a reload; requests not yet taken
  // become one.
  void PostReload(std::string reason);

  // Main thread only. From now on Next() also polls `work`'s descriptors and
  // calls its Turn (on entry, when one is readable and when it is due), so
  // the work runs on the main thread between events. Null: no more. `work`
  // must outlive its turn here.
  void Drive(PollDriven* work) { driven_ = work; }

  // Main thread only. Blocks for the next event. A stop signal comes before
  // a reload or vouch that was waiting with it; a SIGHUP takes the reloads
  // posted before it (one reload for all, their reasons joined).
  Event Next();

 private:
  RunEvents(int signal_fd, int event_fd) : signal_fd_(signal_fd), event_fd_(event_fd) {}
  // Takes one pending signal, if any; false when none was pending.
  bool TakeSignal(Event* out);

  const int signal_fd_;
  const int event_fd_;
  std::mutex mu_;
  std::vector<std::string> reasons_;  // protected by mu_: reloads posted, not yet taken
  PollDriven* driven_ = nullptr;      // main thread only
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_RUN_EVENTS_H_
