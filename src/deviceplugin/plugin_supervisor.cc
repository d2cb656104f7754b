#include "deviceplugin/plugin_supervisor.h"

#include <sys/stat.h>

#include <random>

#include "base/duration.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"
#include "deviceplugin/kubelet_client.h"

namespace gpu_agent::deviceplugin {
absl::StatusOr<std::unique_ptr<PluginSupervisor>> PluginSupervisor::Start(
    SupervisorOptions options, std::vector<ResourceRuntime> resources) {
  std::unique_ptr<PluginSupervisor> sup(new PluginSupervisor(std::move(options)));
  const std::string& ks = sup->options_.kubelet_socket;
  const size_t slash = ks.rfind('/');
  sup->folder_ = slash == 0 ? "/" : ks.substr(0, slash);
  sup->kubelet_name_ = ks.substr(slash + 1);
  for (ResourceRuntime& r : resources) {
    auto slot = std::make_unique<Slot>();
    slot->runtime = std::move(r);
    if (absl::Status s = sup->Serve(*slot); !s.ok()) {
      for (auto& started : sup->slots_) started->server->Stop(sup->options_.stop_deadline);
      return s;
    }
    sup->slots_.push_back(std::move(slot));
  }
  PluginSupervisor* raw = sup.get();
  absl::StatusOr<std::unique_ptr<SocketWatcher>> watcher = SocketWatcher::Start(
      sup->folder_, [raw](const std::string& name, SocketWatcher::Change change) {
        if (name == raw->kubelet_name_ && change == SocketWatcher::Change::kCreated) {
          raw->Post({EventKind::kKubeletSocket, name});
        } else if (change == SocketWatcher::Change::kDeleted) {
          raw->Post({EventKind::kSocketDeleted, name});
        }
      });
  if (!watcher.ok()) {
    for (auto& started : sup->slots_) started->server->Stop(sup->options_.stop_deadline);
    return watcher.status();
  }
  sup->watcher_ = *std::move(watcher);
  sup->PublishStatus();
  sup->control_ = std::thread([raw] { raw->ControlLoop(); });
  return sup;
}

PluginSupervisor::~PluginSupervisor() { Stop(); }

std::string PluginSupervisor::SocketPath(const std::string& endpoint) const {
  return folder_ == "/" ? "/" + endpoint : folder_ + "/" + endpoint;
}

absl::Status PluginSupervisor::Serve(Slot& slot) {
  if (slot.server) slot.server->Stop(options_.stop_deadline);
  slot.server.reset();
  slot.service =
      std::make_shared<DevicePluginService>(slot.runtime.publisher, slot.runtime.allocator);
  absl::StatusOr<std::unique_ptr<PluginServer>> server =
      PluginServer::Start(SocketPath(slot.runtime.publisher->endpoint()), slot.service);
  if (!server.ok()) return server.status();
  slot.server = *std::move(server);
  slot.registered = false;
  slot.next_try = std::chrono::steady_clock::now();
  slot.backoff = std::chrono::milliseconds(0);
  LogInfo("serving device plugin", {{"resource", slot.runtime.publisher->resource_name()},
                                    {"socket", slot.server->socket_path()}});
  return absl::OkStatus();
}

void PluginSupervisor::Post(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

absl::Status PluginSupervisor::Reload(std::vector<ResourceRuntime> resources) {
  std::unique_lock<std::mutex> lock(mu_);
  pending_reload_ = std::move(resources);
  reload_done_ = false;
  events_.push_back({EventKind::kReload, ""});
  cv_.notify_all();
  cv_.wait(lock, [this] { return reload_done_ || stopping_; });
  return reload_status_;
}

void PluginSupervisor::PublishStatus() {
  std::vector<StatusEntry> entries;
  for (const auto& slot : slots_) {
    StatusEntry e;
    e.status.resource_name = slot->runtime.publisher->resource_name();
    e.status.serving = slot->server != nullptr;
    e.status.socket_path = slot->server ? slot->server->socket_path() : "";
    e.status.registered = slot->registered;
    e.status.registrations = slot->registrations;
    e.service = slot->service;
    entries.push_back(std::move(e));
  }
  std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(entries);
}

void PluginSupervisor::HandleEvent(const Event& e) {
  switch (e.kind) {
    case EventKind::kKubeletSocket: {
      if (ever_registered_) ++kubelet_restarts_;
      LogInfo("kubelet socket appeared; serving and registering again",
              {{"socket", options_.kubelet_socket}});
      for (auto& slot : slots_) {
        // A starting kubelet removes every socket in its folder.
        if (InodeOf(slot->server->socket_path()) != slot->server->socket_inode()) {
          if (absl::Status s = Serve(*slot); !s.ok()) {
            LogError("cannot serve again", {{"error", std::string(s.message())}});
          }
        }
        slot->registered = false;
        slot->next_try = std::chrono::steady_clock::now();
        slot->backoff = std::chrono::milliseconds(0);
      }
      break;
    }
    case EventKind::kSocketDeleted:
      for (auto& slot : slots_) {
        if (slot->runtime.publisher->endpoint() != e.name) continue;
        if (InodeOf(slot->server->socket_path()) == slot->server->socket_inode()) continue;
        LogWarning("plugin socket was removed; serving and registering again",
                   {{"socket", slot->server->socket_path()}});
        if (absl::Status s = Serve(*slot); !s.ok()) {
          LogError("cannot serve again", {{"error", std::string(s.message())}});
        }
      }
      break;
    case EventKind::kReload: {
      std::vector<ResourceRuntime> next;
      {
        std::lock_guard<std::mutex> lock(mu_);
        next = std::move(pending_reload_);
      }
      for (auto& slot : slots_) slot->server->Stop(options_.stop_deadline);
      std::vector<std::unique_ptr<Slot>> fresh;
      absl::Status status;
      for (ResourceRuntime& r : next) {
        auto slot = std::make_unique<Slot>();
        slot->runtime = std::move(r);
        absl::Status s = Serve(*slot);
        if (!s.ok()) {
          status = s;
          continue;
        }
        fresh.push_back(std::move(slot));
      }
      slots_ = std::move(fresh);
      PublishStatus();
      {
        std::lock_guard<std::mutex> lock(mu_);
        reload_status_ = status;
        reload_done_ = true;
      }
      cv_.notify_all();
      break;
    }
  }
}

void PluginSupervisor::TryRegister(Slot& slot) {
  Registration reg;
  reg.kubelet_socket = options_.kubelet_socket;
  reg.endpoint = slot.runtime.publisher->endpoint();
  reg.resource_name = slot.runtime.publisher->resource_name();
  absl::Status s = RegisterWithKubelet(reg, options_.register_timeout);
  if (s.ok()) {
    slot.registered = true;
    ++slot.registrations;
    ever_registered_ = true;
    slot.failures = 0;
    slot.last_error.clear();
    slot.backoff = std::chrono::milliseconds(0);
    LogInfo("registered with kubelet",
            {{"resource", reg.resource_name}, {"endpoint", reg.endpoint}});
    return;
  }
  ++slot.failures;
  slot.backoff = slot.backoff.count() == 0 ? options_.retry_initial
                                           : std::min(options_.retry_max, slot.backoff * 2);
  slot.next_try = std::chrono::steady_clock::now() + Jitter(slot.backoff);
  const std::string msg(s.message());
  // Say it the first time, when it changes, and then now and then.
  if (msg != slot.last_error || slot.failures % 20 == 0) {
    LogWarning(s.code() == absl::StatusCode::kUnavailable ? "waiting for the kubelet"
                                                          : "kubelet refused registration",
               {{"resource", reg.resource_name},
                {"error", msg},
                {"attempts", StrCat(slot.failures)},
                {"retry_in", StrCat(slot.backoff.count(), "ms")}});
  }
  slot.last_error = msg;
}

void PluginSupervisor::ControlLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (!events_.empty()) {
      Event e = std::move(events_.front());
      events_.pop_front();
      lock.unlock();
      HandleEvent(e);
      PublishStatus();
      lock.lock();
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    auto next = std::chrono::steady_clock::time_point::max();
    Slot* due = nullptr;
    for (auto& slot : slots_) {
      if (slot->registered || !slot->server) continue;
      if (slot->next_try <= now) {
        due = slot.get();
        break;
      }
      next = std::min(next, slot->next_try);
    }
    if (due != nullptr) {
      lock.unlock();
      TryRegister(*due);
      PublishStatus();
      lock.lock();
      continue;
    }
    if (next == std::chrono::steady_clock::time_point::max()) {
      cv_.wait(lock, [this] { return stopping_ || !events_.empty(); });
    } else {
      cv_.wait_until(lock, next, [this] { return stopping_ || !events_.empty(); });
    }
  }
}

void PluginSupervisor::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (control_.joinable()) control_.join();
  watcher_.reset();
  for (auto& slot : slots_) {
    if (slot->server) slot->server->Stop(options_.stop_deadline);
  }
}

std::vector<ResourceStatus> PluginSupervisor::Status() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ResourceStatus> out;
  for (const StatusEntry& e : status_) {
    ResourceStatus st = e.status;
    if (e.service) {
      st.open_streams = e.service->OpenStreams();
      st.allocate_calls = e.service->stats().allocate_calls.load();
      st.allocate_errors = e.service->stats().allocate_errors.load();
      st.preferred_calls = e.service->stats().preferred_calls.load();
      for (const auto& b : e.service->stats().allocate_latency_buckets) {
        st.allocate_latency_buckets.push_back(b.load());
      }
      st.allocate_latency_ns_sum = e.service->stats().allocate_latency_ns_sum.load();
    }
    out.push_back(std::move(st));
  }
  return out;
}

bool PluginSupervisor::Alive(std::chrono::milliseconds timeout, std::string* why) const {
  for (const ResourceStatus& r : Status()) {
    if (!r.serving) continue;  // being replaced, or failed to serve: readiness says so
    if (absl::Status s = ProbePlugin(r.socket_path, timeout); !s.ok()) {
      *why = std::string(s.message());
      return false;
    }
  }
  return true;
}

bool PluginSupervisor::Ready() const {
  for (const ResourceStatus& s : Status()) {
    if (!s.registered || s.open_streams == 0) return false;
  }
  return true;
}

}  // namespace gpu_agent::deviceplugin
