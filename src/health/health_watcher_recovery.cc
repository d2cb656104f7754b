// Probing the GPUs that are out: which one a wait's GPU_IS_LOST meant, and
// which come back (after the quiet period, once NVML answers for them, and
// for a reset-class outage once NVML shows the reset or an operator vouches).
#include <algorithm>
#include <mutex>
#include <string>

#include "base/log.h"
#include "health/health_watcher_state.h"
#include "health/repair_state.h"

namespace gpu_agent::health {

// Whether `uuid` answers, asked on its own handle (`*dev`, null when it has
// none): GPU_IS_LOST for this GPU alone, where a lookup by UUID would
// answer it while any GPU is lost.
nvmlReturn_t HealthWatcher::State::AnswerFor(const std::string& uuid, nvmlDevice_t* dev) {
  nvmlReturn_t r = NVML_SUCCESS;
  *dev = handles->Find(uuid, &r);
  return *dev == nullptr ? r : Answer(*lib, *dev);
}

void HealthWatcher::State::ProbeForLostGpus() {
  int lost = 0;
  for (const std::string& uuid : uuids) {
    const DeviceKey key = DeviceKey::Gpu(uuid);
    if (book.IsOut(key)) {
      // Already out as lost: the wait may go on answering for it.
      if (book.entries().at(key).was_lost) ++lost;
      continue;
    }
    // Only GPU_IS_LOST means lost; another error says nothing of health.
    nvmlDevice_t dev = nullptr;
    if (AnswerFor(uuid, &dev) != NVML_ERROR_GPU_IS_LOST) continue;
    ++lost;
    MarkBad(key, "NVML: the GPU has fallen off the bus (GPU_IS_LOST)", -1,
            /*needs_reset=*/true, /*was_lost=*/true);
  }
  if (lost == 0) {
    LogWarning("NVML's event wait answered GPU_IS_LOST, but every GPU still answers");
  }
}

void HealthWatcher::State::ProbeRecoveries() {
  bool vouched_now;
  {
    std::lock_guard<std::mutex> lock(mu);
    vouched_now = vouched;
    vouched = false;
  }
  if (policy.recovery_period.count() == 0 && !vouched_now) return;
  const auto now = clock->Now();
  bool changed = false;
  auto& unhealthy = book.entries();
  for (auto it = unhealthy.begin(); it != unhealthy.end();) {
    it = ProbeOne(it, now, vouched_now, &changed);
  }
  if (changed) MirrorOutages();
}

// Probes one entry of the book if it is due; returns the next entry (`it`
// is erased when its device came back).
HealthWatcher::State::OutageIt HealthWatcher::State::ProbeOne(OutageIt it, Clock::TimePoint now,
                                                              bool vouched_now, bool* changed) {
  OutageBook::Entry& bad = it->second;
  const bool vouched_for = vouched_now && bad.needs_reset;
  if (bad.next_probe > now && !vouched_for) return ++it;
  const DeviceKey key = it->first;
  const std::string& uuid = key.uuid;
  const auto look_again = now + std::min(policy.recovery_period, policy.wait_timeout);
  nvmlDevice_t dev = nullptr;
  const nvmlReturn_t r = AnswerFor(uuid, &dev);
  if (r == NVML_ERROR_GPU_IS_LOST && !bad.was_lost) {
    bad.was_lost = true;
    *changed = true;
  }
  if (r != NVML_SUCCESS) {
    // Still lost: look again after another quiet period.
    bad.next_probe = look_again;
    return ++it;
  }
  if (key.IsWholeGpu() && failing_unhealthy.count(uuid) > 0 &&
      HeldByFailingCheck(uuid, vouched_for)) {
    // A polled check still fails at severity unhealthy: whatever the quiet
    // period, the GPU stays out.
    bad.next_probe = look_again;
    return ++it;
  }
  std::string missing;
  if (bad.needs_reset && !vouched_for && !ShowsReset(*lib, dev, bad.xid, bad.was_lost, &missing)) {
    if (!bad.waiting_said) {
      bad.waiting_said = true;
      LogWarning(
          "GPU answers but still needs a reset: keeping it out",
          {{"uuid", uuid},
           {"target", key.ToString()},
           {"reason", bad.reason},
           {"missing", missing},
           {"once_repaired", "reset the GPU (nvidia-smi -r), or send SIGUSR1 to gpu-agent"}});
    }
    bad.next_probe = look_again;
    return ++it;
  }
  *changed = true;
  const bool was_reset = key.IsWholeGpu() && (bad.was_lost || bad.needs_reset);
  it = book.entries().erase(it);  // std::map: marks in BringBack leave `it` valid
  BringBack(key, was_reset, vouched_for);
  return it;
}

// Asks `uuid`'s checks again now rather than at the next poll (a repair
// shows at once). True when one still fails at severity unhealthy and no
// operator vouched for the GPU; an operator's word, as for a reset-class
// XID, makes the checks that fail now no longer hold it out, until each
// has passed once.
bool HealthWatcher::State::HeldByFailingCheck(const std::string& uuid, bool vouched_for) {
  Judge({poller->PollOne(uuid)});
  if (failing_unhealthy.count(uuid) == 0) return false;
  if (!vouched_for) return true;
  for (auto& [k, level] : levels) {
    if (k.first == uuid && level == Severity::kUnhealthy) vouched_checks.insert(k);
  }
  failing_unhealthy.erase(uuid);
  return false;
}

// `key` is out of the book: its GPU is watched again, and it is reported
// healthy unless it was marked again meanwhile.
void HealthWatcher::State::BringBack(const DeviceKey& key, bool was_reset, bool vouched_for) {
  const std::string& uuid = key.uuid;
  if (was_reset && events) {
    // A reset dropped the GPU's event registration with the rest of its
    // driver state: only a fresh one sees its next XID.
    for (const auto& [lost, why] :
         events->Rebuild(uuid, [this](const nvmlEventData_t& ev) { HandleEvent(ev); })) {
      MarkBad(DeviceKey::Gpu(lost), why, -1);
    }
  } else if (events && !events->Watches(uuid)) {
    Register(uuid);
  }
  // Marked again meanwhile (NVML lost it between the probe and the
  // registration): it stays out, and says so itself.
  if (book.IsOut(key)) return;
  LogInfo(key.IsWholeGpu() ? "GPU healthy again" : "MIG instance healthy again",
          {{"uuid", uuid},
           {"target", key.ToString()},
           {"because", vouched_for ? "an operator vouched for it (SIGUSR1)" : "NVML answers"}});
  Report({key, true, "recovered", -1});
}

}  // namespace gpu_agent::health
