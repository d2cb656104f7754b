// The one skeleton of `run`'s modes: start, the metrics server and its
// probes, the reload loop and the stop order are written here once; plugin,
// static and DRA mode fill in a Mode.
//
// Health is wired here once for every mode: the Node's health events and
// condition (health.nodeEvents) start before the mode and stop after it,
// and each watcher a mode starts (WatchHealth) reports to them as well as to
// the mode.
//
// Order: notes -> Start(first generation) -> metrics server (/metrics, /readyz,
// /healthz) -> for each reload asked for: the next generation built
// (reload.h), its warnings logged, Reload(running, next) -> on SIGTERM or
// SIGINT: metrics server stopped (no scrape sees the teardown), then Stop,
// then the notes. A reload whose generation is of another mode, which can
// be served here (mode_switch.h), ends the run the same way, handing the
// generation to the next mode.
#ifndef GPU_AGENT_AGENT_RUN_MODE_RUNNER_H_
#define GPU_AGENT_AGENT_RUN_MODE_RUNNER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/plan/generation.h"
#include "agent/run/mode_context.h"
#include "base/prom_text.h"
#include "health/health_notes.h"
#include "health/health_slot.h"
#include "health/health_watcher.h"

namespace gpu_agent {

// Why a mode stops: the process ends, or the node's config label named a
// config of another mode, which takes over the node in this process
// (mode_switch.h).
enum class StopFor { kExit, kSwitch };

class Mode {
 public:
  virtual ~Mode() = default;

  // "plugin", "static", "dra": gpu_agent_build_info's mode label and log lines.
  virtual const char* name() const = 0;
  // Serves `gen`. On an error the runner logs it, calls Stop and exits with
  // ExitCodeFor(error).
  virtual absl::Status Start(const Generation& gen) = 0;
  // Serves `next` instead of `running`. An error ends the run (exit 1)
  // after Stop; a mode that can go on with the running state logs and
  // returns OK.
  virtual absl::Status Reload(const Generation& running, const Generation& next) = 0;
  // Tears down whatever Start and Reload set up; `last` is the generation
  // served last. Called once, after the metrics server stopped. For a
  // switch, what running pods still use (a CDI spec, prepared claims' specs)
  // stays for the next mode.
  virtual void Stop(const Generation& last, StopFor why) = 0;

  // The mode's own metric families (the runner adds build info, the
  // per-node config's and XIDs). Called from the metrics server's thread.
  virtual void RenderMetrics(PromText* p) = 0;
  // /readyz; `why` says what is missing. Metrics server's thread.
  virtual bool Ready(std::string* why) = 0;
  // /healthz beyond the health watcher (which the runner asks); `why` names
  // what does not answer. Metrics server's thread.
  virtual bool Alive(std::string* why) = 0;

  // The health watcher the mode runs (set by Start and Reload).
  health::HealthSlot& health() { return health_; }

 protected:
  // What the mode does with the health watcher's reports (either may be
  // empty). Called on the watcher's thread.
  struct HealthListener {
    std::function<void(const health::HealthChange&)> on_change;
    std::function<void(const health::CheckChange&)> on_check;
  };

  // Starts the health watcher of `gen`'s GPUs (null without NVML), with
  // the outages `carried` from the one before: its reports go to `listener`,
  // then to the Node's events and condition. The mode puts it in health()
  // when it is ready for it.
  std::unique_ptr<health::HealthWatcher> WatchHealth(const Generation& gen,
                                                     std::vector<health::Outage> carried,
                                                     HealthListener listener);

 private:
  friend struct ModeEnd RunMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen,
                                Mode& mode);

  health::HealthSlot health_;
  // Set by RunMode before Start.
  std::shared_ptr<const nvml::NvmlLibrary> lib_;
  std::shared_ptr<health::HealthNotes> notes_;
};

// How a mode's run ended: the exit code, or (`next` set) the generation of
// another mode that takes over the node now.
struct ModeEnd {
  int code = 0;
  std::shared_ptr<const Generation> next;
  // With `next`: the generation that ran until the switch (to go back to
  // should `next` fail to start).
  std::shared_ptr<const Generation> last;
  bool start_failed = false;  // Start failed: nothing was served
};

// Runs `mode` from `gen` until a stop or a switch.
ModeEnd RunMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen, Mode& mode);

// gpu_agent_build_info{version, mode}: every answer of /metrics starts with
// it, the driver wait's too.
void RenderBuildInfo(PromText* p, const std::string& mode);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_MODE_RUNNER_H_
