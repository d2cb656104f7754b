#include "agent/run/mode_runner.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <thread>

#include "agent/run/health_wiring.h"
#include "agent/run/metrics_server.h"
#include "agent/run/mode_switch.h"
#include "agent/run/reload.h"
#include "base/backoff.h"
#include "base/duration.h"
#include "base/exit_code.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/version.h"
#include "health/health_metrics.h"

namespace gpu_agent {

void RenderBuildInfo(PromText* p, const std::string& mode) {
  p->Family("gpu_agent_build_info", "gauge", "Build information.");
  p->Sample("gpu_agent_build_info", {{"version", kVersion}, {"mode", mode}}, 1);
}

std::unique_ptr<health::HealthWatcher> Mode::WatchHealth(const Generation& gen,
                                                         std::vector<health::Outage> carried,
                                                         HealthListener listener) {
  std::shared_ptr<health::HealthNotes> notes = notes_;
  if (notes) notes->SetGpus(gen.inventory);
  if (!lib_) return nullptr;
  return health::HealthWatcher::Start(
      lib_, gen.model.gpu_uuids, gen.model.initially_unhealthy, HealthPolicyFrom(gen.config()),
      [notes, on_change = std::move(listener.on_change)](const health::HealthChange& c) {
        if (on_change) on_change(c);
        if (notes) notes->OnChange(c);
      },
      std::move(carried), Clock::Real(),
      [notes, on_check = std::move(listener.on_check)](const health::CheckChange& c) {
        if (on_check) on_check(c);
        if (notes) notes->OnCheck(c);
      });
}

namespace {

// How soon a switch that waits (CanSwitch: Unavailable) is asked again.
// How soon a switch that waits (CanSwitch: Unavailable) is asked again:
// 5 s, doubled each time up to a minute (each ask is a reload, NVML's
// discovery included).
constexpr std::chrono::seconds kSwitchRetryFirst{5};
constexpr std::chrono::seconds kSwitchRetryMost{60};

// A reload asked for once a wait has passed, unless cancelled first (or
// destroyed): a switch that waits is asked again.
class DelayedReload {
 public:
  explicit DelayedReload(RunEvents* events)
      : events_(events), backoff_(Backoff::Doubling(kSwitchRetryFirst, kSwitchRetryMost)) {}
  ~DelayedReload() { Cancel(); }
  DelayedReload(const DelayedReload&) = delete;
  DelayedReload& operator=(const DelayedReload&) = delete;

  // Asks for the reload after the next wait of the backoff; returns the wait.
  std::chrono::milliseconds Again(std::string reason) {
    Cancel();
    const std::chrono::milliseconds after = backoff_.Next();
    thread_ =
        std::jthread([events = events_, after, reason = std::move(reason)](std::stop_token stop) {
          std::mutex mu;
          std::condition_variable_any cv;
          std::unique_lock<std::mutex> lock(mu);
          cv.wait_for(lock, stop, after, [] { return false; });
          if (!stop.stop_requested()) events->PostReload(reason);
        });
    return after;
  }
  // No reload pending, and the backoff from the start.
  void Cancel() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  void Reset() {
    Cancel();
    backoff_.Reset();
  }

 private:
  RunEvents* const events_;
  Backoff backoff_;
  std::jthread thread_;
};

// Whether `next` is of another mode that can take over now; when it
// cannot, says why and the running mode stays. A switch that waits for
// something to come right is asked again (`retry`), said as a warning when
// its reason is new and then at debug level (`waiting`: the last reason
// given), and on the Node's GpuAgentMode condition.
bool SwitchesMode(const ModeContext& ctx, const Generation& running, const Generation& next,
                  const Mode& mode, DelayedReload* retry, std::string* waiting) {
  if (next.config().agent_mode() == running.config().agent_mode()) return false;
  if (absl::Status s = CanSwitch(running, next); !s.ok()) {
    if (absl::IsUnavailable(s)) {
      const std::string why(s.message());
      const std::chrono::milliseconds after =
          retry->Again(StrCat("a switch to ", next.config().mode, " mode waits"));
      Log(why == *waiting ? LogLevel::kDebug : LogLevel::kWarning,
          StrCat("the node's config asks for ", next.config().mode, " mode; the switch waits, ",
                 mode.name(), " mode keeps the node meanwhile"),
          {{"error", why}, {"retry_in", FormatDuration(after)}});
      if (why != *waiting && ctx.mode_condition) {
        ctx.mode_condition->Set(
            mode.name() == std::string("dra") ? "Dra" : "DevicePlugin",
            StrCat(mode.name(), " mode; the switch to ", next.config().mode, " mode waits: ", why));
      }
      *waiting = why;
      return false;
    }
    waiting->clear();
    retry->Reset();
    LogError(StrCat("the node's config asks for ", next.config().mode,
                    " mode, which cannot run "
                    "here; staying in ",
                    mode.name(), " mode"),
             {{"error", std::string(s.message())}});
    return false;
  }
  retry->Reset();
  LogInfo(StrCat("the node's config asks for ", next.config().mode, " mode: handing the node over"),
          {{"from", mode.name()}, {"to", next.config().mode}});
  return true;
}

// Serves `gen` and its reloads until a stop or a switch; the notes are the
// caller's.
ModeEnd Serve(const ModeContext& ctx, std::shared_ptr<const Generation> gen, Mode& mode) {
  if (absl::Status s = mode.Start(*gen); !s.ok()) {
    LogError(StrCat("cannot start ", mode.name(), " mode"), {{"error", std::string(s.message())}});
    mode.Stop(*gen, StopFor::kExit);
    return {ExitCodeFor(s), nullptr, nullptr, /*start_failed=*/true};
  }
  NodeConfigSelector* node_config = ctx.node_config;
  MetricsServer::Handlers handlers;
  handlers.metrics = [&mode, node_config] {
    PromText p;
    RenderBuildInfo(&p, mode.name());
    if (node_config) node_config->RenderMetrics(&p);
    mode.RenderMetrics(&p);
    p.Family("gpu_agent_xid_events_total", "counter", "NVML XID events by code, ignored ones too.");
    for (const auto& [xid, n] : mode.health().XidCounts()) {
      p.Sample("gpu_agent_xid_events_total", {{"xid", StrCat(xid)}}, static_cast<double>(n));
    }
    const health::HealthSlot& h = mode.health();
    health::RenderHealthMetrics(h.Checks(), h.Outages(), h.Polls(), h.PollCalls(), &p);
    return p.str();
  };
  handlers.ready = [&mode](std::string* why) { return mode.Ready(why); };
  handlers.alive = [&mode](std::string* why) {
    return mode.health().Alive(why) && mode.Alive(why);
  };
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
      StartMetricsIfConfigured(gen->config(), std::move(handlers));
  if (!metrics.ok()) {
    mode.Stop(*gen, StopFor::kExit);
    return {kExitFailure, nullptr, nullptr, false};
  }
  ModeEnd end;
  DelayedReload retry(ctx.events);
  std::string waiting;  // why a switch last waited
  auto vouch = [&mode] { mode.health().OperatorVouches(); };
  while (std::shared_ptr<const Generation> next =
             NextGeneration(*ctx.events, ctx.request, *gen, ctx.lib, node_config, vouch)) {
    for (const std::string& w : next->warnings) LogWarning(w);
    if (next->config().agent_mode() != gen->config().agent_mode()) {
      if (!SwitchesMode(ctx, *gen, *next, mode, &retry, &waiting)) continue;
      end.next = std::move(next);
      break;
    }
    // Relabelled back to the running mode: a switch that waited is off.
    waiting.clear();
    retry.Reset();
    if (absl::Status s = mode.Reload(*gen, *next); !s.ok()) {
      LogError("reloaded config cannot run; exiting", {{"error", std::string(s.message())}});
      end.code = kExitFailure;
      break;
    }
    LogInfo("reload done", {{"gpus", StrCat(next->inventory.gpus.size())}});
    gen = std::move(next);
  }
  if (*metrics) (*metrics)->Stop();  // no scrape sees what is being torn down
  mode.Stop(*gen, end.next ? StopFor::kSwitch : StopFor::kExit);
  if (end.next) end.last = std::move(gen);
  return end;
}

}  // namespace

ModeEnd RunMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen, Mode& mode) {
  mode.lib_ = ctx.lib;
  mode.notes_ = StartHealthNotes(gen->config(), mode.name());
  ModeEnd end = Serve(ctx, std::move(gen), mode);
  mode.notes_->Stop();  // after the mode, whose watcher is stopped
  // The stopped health threads that have ended; one still in NVML's event
  // wait, which cannot be interrupted, ends with the process.
  if (const int left = health::HealthWatcher::JoinStopped(std::chrono::milliseconds(0));
      left > 0 && !end.next) {
    LogDebug("exiting while a GPU health thread is in NVML's event wait",
             {{"threads", StrCat(left)}});
  }
  return end;
}

}  // namespace gpu_agent
