// The supervisor's registrations: Register with the kubelet on a thread of
// its own that reports back as an event, its answer (a retry with backoff
// on a failure), cancelling one whose socket is gone, and healing a
// registration the kubelet holds no ListAndWatch stream for (see
// plugin_supervisor.h).
#include <algorithm>
#include <memory>
#include <string>
#include <thread>

#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"
#include "deviceplugin/plugin_supervisor.h"

namespace gpu_agent::deviceplugin {

void PluginSupervisor::StartRegister(Slot& slot) {
  Registration reg;
  reg.kubelet_socket = options_.kubelet_socket;
  reg.endpoint = slot.runtime.publisher->endpoint();
  reg.resource_name = slot.runtime.publisher->resource_name();
  // A kubelet may open the stream before Register has returned here.
  const uint64_t opened = slot.service->stats().streams_opened.load();
  // The kubelet this call goes to, as it is now: a restart while the call
  // is out is then told from it.
  FileIdentity kubelet;
  IdentityOf(options_.kubelet_socket, &kubelet);
  if (register_thread_.joinable()) register_thread_.join();  // it has reported already
  auto call = std::make_shared<CallCanceller>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    register_call_ = call;
  }
  registering_ = true;
  registering_slot_ = slot.id;
  registering_attempt_ = slot.attempt;
  register_thread_ =
      std::thread([this, reg, call, kubelet, id = slot.id, attempt = slot.attempt, opened] {
        NameThisThread("register");
        Event e{EventKind::kRegistered, reg.resource_name};
        e.status = RegisterWithKubelet(reg, options_.register_timeout, call.get());
        e.slot_id = id;
        e.attempt = attempt;
        e.streams_opened = opened;
        e.kubelet = kubelet;
        Post(std::move(e));
      });
}

void PluginSupervisor::CancelStaleRegister() {
  if (!registering_) return;
  for (const auto& s : slots_) {
    if (s->id == registering_slot_ && s->attempt == registering_attempt_) return;  // still wanted
  }
  // What it registers is gone (a reload, a fresh socket, a new kubelet):
  // waiting out a kubelet that holds it would hold up every registration.
  CancelRegisterCall();
}

void PluginSupervisor::CancelRegisterCall() {
  std::shared_ptr<CallCanceller> call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    call = register_call_;
  }
  if (call) call->Cancel();
}

void PluginSupervisor::FinishRegister(const Event& e) {
  registering_ = false;
  if (register_thread_.joinable()) register_thread_.join();  // it posted; it is ending
  const auto now = std::chrono::steady_clock::now();
  Slot* slot = nullptr;
  for (auto& s : slots_) {
    if (s->id == e.slot_id) slot = s.get();
  }
  if (slot == nullptr || slot->attempt != e.attempt) {
    // What it registered was replaced meanwhile (a reload, a fresh socket, a
    // new kubelet). Its client may still be current in the kubelet: the
    // next registration settles first, as after any generation's end.
    for (auto& s : slots_) {
      if (!s->registered) s->next_try = std::max(s->next_try, now + options_.settle);
    }
    return;
  }
  const absl::Status& s = e.status;
  if (s.ok()) {
    kubelet_identity_ = e.kubelet;
    slot->registered = true;
    slot->last_registered = now;
    ++slot->registrations;
    ever_registered_ = true;
    slot->failures = 0;
    slot->last_error.clear();
    slot->register_retries.Reset();
    slot->streams_before_register = e.streams_opened;
    LogInfo("registered with kubelet",
            {{"resource", e.name}, {"endpoint", slot->runtime.publisher->endpoint()}});
    return;
  }
  ++slot->failures;
  const Duration wait = slot->register_retries.Next();
  slot->next_try = now + wait;
  const std::string msg(s.message());
  // Say it the first time, when it changes, and then now and then.
  if (msg != slot->last_error || slot->failures % 20 == 0) {
    LogWarning(s.code() == absl::StatusCode::kUnavailable ? "waiting for the kubelet"
                                                          : "kubelet refused registration",
               {{"resource", e.name},
                {"error", msg},
                {"attempts", StrCat(slot->failures)},
                {"retry_in", StrCat(wait.count(), "ms")}});
  }
  slot->last_error = msg;
}

void PluginSupervisor::Heal(Slot& slot) {
  const std::string resource = slot.runtime.publisher->resource_name();
  const auto now = std::chrono::steady_clock::now();
  FileIdentity kubelet;
  if (!IdentityOf(options_.kubelet_socket, &kubelet)) {
    // Nothing to register with; its socket's return is an event.
    LogWarning("no ListAndWatch stream and no kubelet socket; waiting for the kubelet",
               {{"resource", resource}, {"socket", options_.kubelet_socket}});
    slot.registered = false;
    slot.next_try = now + options_.retry_max;
    return;
  }
  ++slot.stream_heals;
  const bool had_stream =
      slot.service->stats().streams_opened.load() > slot.streams_before_register;
  if (had_stream) slot.graces.Reset();
  slot.grace = slot.graces.NextExact();
  const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(
      now - std::max(slot.streamless_since, slot.last_registered));
  LogWarning(
      "the kubelet holds no ListAndWatch stream; serving on a fresh socket and "
      "registering again",
      {{"resource", resource},
       {"reason", had_stream ? "the stream ended and no new one was opened"
                             : "no stream was opened after registering"},
       {"without_stream", StrCat(quiet.count(), "ms")},
       {"occurrence", StrCat(slot.stream_heals)}});
  if (absl::Status s = Serve(slot, /*settle=*/true); !s.ok()) {
    LogError("cannot serve again", {{"error", std::string(s.message())}});
  }
}

bool PluginSupervisor::RefreshStreams(std::chrono::steady_clock::time_point now) {
  bool changed = false;
  for (auto& slot : slots_) {
    const bool open = slot->service && slot->service->OpenStreams() > 0;
    const bool was_streamless = slot->streamless_since != std::chrono::steady_clock::time_point{};
    if (open) {
      if (was_streamless) {
        slot->streamless_since = {};
        changed = true;
      }
    } else if (!was_streamless) {
      slot->streamless_since = now;
      changed = true;
    }
  }
  return changed;
}

}  // namespace gpu_agent::deviceplugin
