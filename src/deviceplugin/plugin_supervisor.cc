// The supervisor's control thread: its start and stop, the events it is posted
// and the socket folder's changes, serving each resource, and the turn that
// does what is due (see plugin_supervisor.h; registering and healing in
// plugin_supervisor_register.cc, status in plugin_supervisor_status.cc).
#include "deviceplugin/plugin_supervisor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "base/duration.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::deviceplugin {
namespace {

// The supervisor's sequences start over where it says (Reset: a fresh
// socket, a registration, a stream), never after a quiet stretch alone.
constexpr Duration kNeverQuiet = std::chrono::hours(24 * 365);

}  // namespace

PluginSupervisor::Slot::Slot(uint64_t slot_id, ResourceRuntime resource, const SupervisorOptions& o)
    : id(slot_id),
      runtime(std::move(resource)),
      register_retries(Backoff::Doubling(o.retry_initial, o.retry_max, Clock::Real(), kNeverQuiet)),
      serve_retries(Backoff::Doubling(o.retry_initial, o.retry_max, Clock::Real(), kNeverQuiet)),
      // Never under the grace an operator set.
      graces(Backoff::Doubling(o.stream_grace, std::max(o.retry_max, o.stream_grace), Clock::Real(),
                               kNeverQuiet)) {}

absl::StatusOr<std::unique_ptr<PluginSupervisor>> PluginSupervisor::Start(
    SupervisorOptions options, std::vector<ResourceRuntime> resources) {
  std::unique_ptr<PluginSupervisor> sup(new PluginSupervisor(std::move(options)));
  const std::string& ks = sup->options_.kubelet_socket;
  const size_t slash = ks.rfind('/');
  sup->folder_ = slash == 0 ? "/" : ks.substr(0, slash);
  sup->kubelet_name_ = ks.substr(slash + 1);
  for (ResourceRuntime& r : resources) {
    auto slot = std::make_unique<Slot>(sup->next_slot_id_++, std::move(r), sup->options_);
    if (absl::Status s = sup->Serve(*slot, /*settle=*/false); !s.ok()) {
      for (auto& started : sup->slots_) started->server->Stop(sup->options_.stop_deadline);
      return s;
    }
    sup->slots_.push_back(std::move(slot));
  }
  PluginSupervisor* raw = sup.get();
  if (sup->options_.watch_folder) {
    absl::StatusOr<std::unique_ptr<SocketWatcher>> watcher = SocketWatcher::Open(sup->folder_);
    if (!watcher.ok()) {
      for (auto& started : sup->slots_) started->server->Stop(sup->options_.stop_deadline);
      return watcher.status();
    }
    sup->watcher_ = *std::move(watcher);
  }
  sup->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (sup->wake_fd_ < 0) {
    const int err = errno;
    for (auto& started : sup->slots_) started->server->Stop(sup->options_.stop_deadline);
    return absl::ResourceExhaustedError(StrCat("eventfd: ", std::strerror(err)));
  }
  sup->PublishStatus();
  if (sup->options_.own_thread) {
    sup->control_ = std::thread([raw] {
      NameThisThread("supervisor");
      raw->ControlLoop();
    });
  }
  return sup;
}

PluginSupervisor::~PluginSupervisor() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void PluginSupervisor::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void PluginSupervisor::OnFolderChange(const std::string& name, SocketWatcher::Change change) {
  std::optional<Event> e;
  if (change == SocketWatcher::Change::kOverflow) {
    e = Event{EventKind::kRescan, ""};
  } else if (name == kubelet_name_ && change == SocketWatcher::Change::kCreated) {
    e = Event{EventKind::kKubeletSocket, name};
  } else if (change == SocketWatcher::Change::kDeleted) {
    e = Event{EventKind::kSocketDeleted, name};
  }
  if (!e) return;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(*e));  // the control thread itself: no wake needed
}

void PluginSupervisor::WaitForWork(std::chrono::steady_clock::time_point next) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !events_.empty()) return;
  }
  // An event posted after the check above still finds the eventfd readable.
  const int timeout_ms = PollTimeoutMs(next);
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {watcher_ ? watcher_->fd() : -1, POLLIN, 0}};
  if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
    // Never seen; waiting on the clock alone keeps timers and posts served
    // (a post is seen at the next wake), without spinning.
    LogError("the supervisor's poll failed; waiting on timers alone",
             {{"error", std::strerror(errno)}});
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void PluginSupervisor::DrainDescriptors() {
  uint64_t count = 0;
  (void)!::read(wake_fd_, &count, sizeof count);  // non-blocking: EAGAIN when not woken
  if (watcher_) {
    watcher_->Drain([this](const std::string& name, SocketWatcher::Change change) {
      OnFolderChange(name, change);
    });
  }
}

std::vector<int> PluginSupervisor::Descriptors() const {
  std::vector<int> fds = {wake_fd_};
  if (watcher_) fds.push_back(watcher_->fd());
  return fds;
}

std::string PluginSupervisor::SocketPath(const std::string& endpoint) const {
  return folder_ == "/" ? "/" + endpoint : folder_ + "/" + endpoint;
}

absl::Status PluginSupervisor::Serve(Slot& slot, bool settle) {
  if (slot.server) slot.server->Stop(options_.stop_deadline);
  slot.server.reset();
  slot.service =
      std::make_shared<DevicePluginService>(slot.runtime.publisher, slot.runtime.allocator);
  slot.service->SetStreamObserver([this] { Post({EventKind::kStreams, ""}); });
  absl::StatusOr<std::unique_ptr<PluginServer>> server =
      PluginServer::Start(SocketPath(slot.runtime.publisher->endpoint()), slot.service);
  if (!server.ok()) {
    // Tried again from the control loop; meanwhile nothing is registered.
    slot.registered = false;
    slot.next_serve = std::chrono::steady_clock::now() + slot.serve_retries.Next();
    return server.status();
  }
  slot.server = *std::move(server);
  slot.serve_retries.Reset();
  slot.registered = false;
  ++slot.attempt;  // a Register in flight was for the old socket
  slot.streams_before_register = 0;
  slot.next_try =
      std::chrono::steady_clock::now() + (settle ? options_.settle : std::chrono::milliseconds(0));
  slot.register_retries.Reset();
  LogInfo("serving device plugin", {{"resource", slot.runtime.publisher->resource_name()},
                                    {"socket", slot.server->socket_path()}});
  return absl::OkStatus();
}

bool PluginSupervisor::IdentityOf(const std::string& path, FileIdentity* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  out->ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return true;
}

void PluginSupervisor::CheckSockets() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = rescans_done_ + 1;
  events_.push_back({EventKind::kRescan, ""});
  if (!options_.own_thread) {
    lock.unlock();
    Turn();  // the caller is the driving thread
    return;
  }
  Wake();
  cv_.wait(lock, [&] { return rescans_done_ >= target || stopping_; });
}

void PluginSupervisor::Post(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  Wake();
}

absl::Status PluginSupervisor::Reload(std::vector<ResourceRuntime> resources) {
  std::unique_lock<std::mutex> lock(mu_);
  pending_reload_ = std::move(resources);
  reload_done_ = false;
  events_.push_back({EventKind::kReload, ""});
  if (!options_.own_thread) {
    lock.unlock();
    Turn();  // the caller is the driving thread
    lock.lock();
    return reload_status_;
  }
  Wake();
  cv_.wait(lock, [this] { return reload_done_ || stopping_; });
  return reload_status_;
}

void PluginSupervisor::HandleEvent(const Event& e) {
  switch (e.kind) {
    case EventKind::kKubeletSocket: {
      if (ever_registered_) ++kubelet_restarts_;
      // The kubelet followed from now on; a rescan before its registration
      // answers compares against it, not the one it replaced.
      IdentityOf(options_.kubelet_socket, &kubelet_identity_);
      LogInfo("kubelet socket appeared; serving and registering again",
              {{"socket", options_.kubelet_socket}});
      for (auto& slot : slots_) {
        // A starting kubelet removes every socket in its folder.
        if (!slot->server || InodeOf(slot->server->socket_path()) != slot->server->socket_inode()) {
          // The kubelet that held the old streams is gone: no settling.
          if (absl::Status s = Serve(*slot, /*settle=*/false); !s.ok()) {
            LogError("cannot serve again", {{"error", std::string(s.message())}});
          }
        }
        slot->registered = false;
        ++slot->attempt;  // a Register in flight went to the old kubelet
        slot->next_try = std::chrono::steady_clock::now();
        slot->register_retries.Reset();
      }
      break;
    }
    case EventKind::kSocketDeleted:
      for (auto& slot : slots_) {
        if (slot->runtime.publisher->endpoint() != e.name || !slot->server) continue;
        if (InodeOf(slot->server->socket_path()) == slot->server->socket_inode()) continue;
        LogWarning("plugin socket was removed; serving and registering again",
                   {{"socket", slot->server->socket_path()}});
        if (absl::Status s = Serve(*slot, /*settle=*/true); !s.ok()) {
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
      for (auto& slot : slots_) {
        if (slot->server) slot->server->Stop(options_.stop_deadline);
      }
      std::vector<std::unique_ptr<Slot>> fresh;
      absl::Status status;
      for (ResourceRuntime& r : next) {
        auto slot = std::make_unique<Slot>(next_slot_id_++, std::move(r), options_);
        // The old generation's streams have ended (Stop above waits for
        // them); settling lets the kubelet drop its client first, or a
        // kubelet since 1.25 would drop the new one.
        if (absl::Status s = Serve(*slot, /*settle=*/true); !s.ok()) {
          status = s;  // kept: the control loop serves it again with backoff
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
    case EventKind::kStreams:
      break;  // RefreshStreams, after every event, looks
    case EventKind::kRegistered:
      FinishRegister(e);
      break;
    case EventKind::kRescan: {
      // Events were lost (the inotify queue overflowed): look instead.
      FileIdentity now;
      const bool present = IdentityOf(options_.kubelet_socket, &now);
      if (ever_registered_ && present && !(now == kubelet_identity_)) {
        LogWarning("kubelet socket was replaced while events were lost");
        HandleEvent({EventKind::kKubeletSocket, kubelet_name_});
      } else {
        for (auto& slot : slots_) {
          if (!slot->server) continue;
          if (InodeOf(slot->server->socket_path()) == slot->server->socket_inode()) continue;
          HandleEvent({EventKind::kSocketDeleted, slot->runtime.publisher->endpoint()});
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++rescans_done_;
      }
      cv_.notify_all();
      break;
    }
  }
}

void PluginSupervisor::ControlLoop() {
  for (;;) {
    const TimePoint next = Turn();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    WaitForWork(next);
  }
}

PollDriven::TimePoint PluginSupervisor::Turn() {
  DrainDescriptors();
  for (;;) {
    std::optional<Event> event;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return TimePoint::max();
      if (!events_.empty()) {
        event = std::move(events_.front());
        events_.pop_front();
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (event) {
      HandleEvent(*event);
      CancelStaleRegister();
      RefreshStreams(now);
      PublishStatus();
      continue;
    }
    if (RefreshStreams(now)) PublishStatus();
    auto next = TimePoint::max();
    Slot* register_due = nullptr;
    Slot* heal_due = nullptr;
    Slot* serve_due = nullptr;
    for (auto& slot : slots_) {
      if (!slot->server) {
        if (slot->next_serve <= now) {
          serve_due = slot.get();
          break;
        }
        next = std::min(next, slot->next_serve);
        continue;
      }
      if (!slot->registered) {
        if (registering_) continue;  // one at a time; its answer is an event
        if (slot->next_try <= now) {
          register_due = slot.get();
          break;
        }
        next = std::min(next, slot->next_try);
      } else if (slot->streamless_since != TimePoint{}) {
        const auto at = std::max(slot->streamless_since, slot->last_registered) +
                        (slot->grace.count() > 0 ? slot->grace : options_.stream_grace);
        if (at <= now) {
          heal_due = slot.get();
          break;
        }
        next = std::min(next, at);
      }
    }
    if (serve_due == nullptr && register_due == nullptr && heal_due == nullptr) return next;
    if (serve_due != nullptr) {
      if (absl::Status s = Serve(*serve_due, /*settle=*/false); !s.ok()) {
        const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
            serve_due->next_serve - std::chrono::steady_clock::now());
        LogError("cannot serve the device plugin; trying again",
                 {{"resource", serve_due->runtime.publisher->resource_name()},
                  {"error", std::string(s.message())},
                  {"retry_in", StrCat(wait.count(), "ms")}});
      }
    }
    if (register_due != nullptr) StartRegister(*register_due);
    if (heal_due != nullptr) {
      Heal(*heal_due);
      CancelStaleRegister();
    }
    RefreshStreams(std::chrono::steady_clock::now());
    PublishStatus();
  }
}

void PluginSupervisor::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();  // callers waiting on a reload or a rescan
  Wake();
  CancelRegisterCall();  // a kubelet may hold Register up to its timeout
  if (control_.joinable()) control_.join();
  if (register_thread_.joinable()) register_thread_.join();
  watcher_.reset();
  for (auto& slot : slots_) {
    if (slot->server) slot->server->Stop(options_.stop_deadline);
  }
}

}  // namespace gpu_agent::deviceplugin
