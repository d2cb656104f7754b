// The polled checks as the watcher's thread runs them: each GPU polled in
// turn, each check's level judged and reported, and a check failing at
// severity unhealthy taking its GPU out as a reset-class XID does.
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "health/health_watcher_state.h"

namespace gpu_agent::health {

// One poll of every GPU's checks: levels updated and reported, a check
// failing at severity unhealthy marks its GPU out the way a reset-class
// XID does, a GPU NVML calls lost goes out as lost. GPUs already out for
// an XID are polled too: their checks still say what is wrong.
// One GPU at a time, handling the events queued meanwhile after each: an
// XID waits for at most one GPU's queries, not the whole poll's. A Stop()
// ends the poll between two GPUs.
void HealthWatcher::State::PollChecks() {
  next_poll = clock->Now() + policy.poll_interval;
  for (const std::string& uuid : uuids) {
    if (Stopping()) return;
    Judge({poller->PollOne(uuid)}, /*whole_poll=*/false);
    DrainEvents();
  }
  std::lock_guard<std::mutex> lock(mu);
  ++polls;
  poll_calls = poller->poll_calls();
}

// Judges polled verdicts; the statuses of GPUs not among them stand.
// `whole_poll`: count it as a poll.
void HealthWatcher::State::Judge(const std::vector<GpuVerdict>& verdicts, bool whole_poll) {
  std::vector<CheckStatus> statuses;
  std::vector<CheckChange> changes;
  for (const GpuVerdict& v : verdicts) JudgeOne(v, &statuses, &changes);
  {
    std::lock_guard<std::mutex> lock(mu);
    std::set<std::string> judged;
    for (const GpuVerdict& v : verdicts) judged.insert(v.uuid);
    for (const CheckStatus& c : checks) {
      if (!judged.count(c.uuid)) statuses.push_back(c);
    }
    checks = std::move(statuses);
    if (whole_poll) ++polls;
    poll_calls = poller->poll_calls();
  }
  for (const CheckChange& c : changes) ReportCheck(c);
}

void HealthWatcher::State::JudgeOne(const GpuVerdict& v, std::vector<CheckStatus>* statuses,
                                    std::vector<CheckChange>* changes) {
  const DeviceKey gpu = DeviceKey::Gpu(v.uuid);
  if (v.lost) {
    // An XID that came with it (79) names it better: handle what the
    // event set holds first.
    DrainEvents();
    if (!book.IsOut(gpu)) {
      MarkBad(gpu, "NVML: the GPU has fallen off the bus (GPU_IS_LOST)", -1,
              /*needs_reset=*/true, /*was_lost=*/true);
    }
    return;
  }
  bool unhealthy = false;
  for (const CheckResult& r : v.results) {
    const CheckSpec& spec = Spec(r.id);
    Severity& level = levels[{v.uuid, r.id}];
    Severity now = level;
    if (r.state == CheckState::kFailing) {
      now = policy.checks[r.id].severity;
    } else if (r.state == CheckState::kPass || r.state == CheckState::kBaseline ||
               r.state == CheckState::kOff) {
      now = Severity::kOk;
    }  // kUnknown: NVML did not answer this time; the level stands
    if (r.state != CheckState::kOff && r.state != CheckState::kUnknown) {
      statuses->push_back({v.uuid, r.id, now, r.value, r.number});
    }
    if (now != level) {
      changes->push_back({{v.uuid, r.id, now, r.value, r.number}, level});
      Log(now == Severity::kOk ? LogLevel::kInfo : LogLevel::kWarning,
          now == Severity::kOk ? "GPU health check passes again" : "GPU health check failing",
          {{"uuid", v.uuid},
           {"check", std::string(spec.name)},
           {"level", std::string(SeverityName(now))},
           {"value", r.value}});
      level = now;
    }
    if (now != Severity::kUnhealthy) vouched_checks.erase({v.uuid, r.id});
    if (now == Severity::kUnhealthy && vouched_checks.count({v.uuid, r.id}) == 0) {
      unhealthy = true;
      // As a reset-class XID: each poll that still fails starts the
      // quiet period again. A GPU already held for a reset (an XID, or
      // another check) keeps its reason and evidence rules; the check
      // failing holds it out besides.
      auto out = book.entries().find(gpu);
      if (out == book.entries().end() || !out->second.needs_reset) {
        MarkBad(gpu, StrCat("health check ", spec.name, ": ", r.value), spec.evidence_xid,
                spec.needs_reset, /*was_lost=*/false, std::string(spec.name));
      }
    }
  }
  if (unhealthy) {
    failing_unhealthy.insert(v.uuid);
  } else {
    failing_unhealthy.erase(v.uuid);
  }
}

}  // namespace gpu_agent::health
