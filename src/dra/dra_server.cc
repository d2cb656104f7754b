#include "dra/dra_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/file_util.h"
#include "base/log.h"
#include "base/poll_driven.h"
#include "base/strings.h"
#include "base/thread_name.h"
#include "dra/dra_plugin_service.h"
#include "dra/dra_registration.h"
#include "dra/health_stream.h"
#include "grpcserver/cq_server.h"

namespace gpu_agent::dra {

// The DRA socket's server with the services it serves (which outlive it).
struct DraSocket {
  DraServices dra;
  HealthServices health;
  std::unique_ptr<grpcserver::CqServer> server;  // last: goes first
};

class DraServer::Impl {
 public:
  Impl(DraServerOptions options, std::shared_ptr<ClaimHandler> handler)
      : options_(std::move(options)),
        plugin_path_(PluginSocketPath(options_)),
        folder_(StrCat(options_.plugin_dir, "/", options_.driver_name)),
        registration_(options_.driver_name, RegistrationSocketPath(options_), plugin_path_),
        claims_(std::move(handler)),
        health_(options_.driver_name, options_.health_resend) {}

  absl::Status Start();
  void Stop(std::chrono::milliseconds deadline);

  void SetHealth(std::vector<DeviceHealthRecord> devices) { health_.Set(std::move(devices)); }
  void SetHealthServing(bool serving) { health_.SetServing(serving); }
  RegistrationState registration() const { return registration_.state(); }
  bool WaitRegistered(std::chrono::milliseconds within) const {
    return registration_.WaitRegistered(within);
  }
  ClaimCallStats stats() const;
  const std::string& registration_socket() const { return registration_.socket_path(); }
  const std::string& plugin_socket() const { return plugin_path_; }

 private:
  // (Re)serves the DRA socket on fresh services; the server before, if
  // any, is retired first.
  absl::Status ServeDra();
  // Shuts the DRA socket's server down (the calls in flight get until
  // `deadline`) and hands it to the claims thread, which frees it once the
  // batches it handed over are answered.
  void RetireDra(std::chrono::system_clock::time_point deadline);
  bool DraGone() const {
    return dra_ == nullptr || InodeOf(plugin_path_) != dra_->server->socket_inode();
  }
  absl::Status WatchFolders();
  absl::Status MakeFoldersAgain();
  void Guard();
  // One turn of the guard after a change or a retry: the folders and the
  // sockets made and served again. False when something is to be retried.
  bool Heal();

  const DraServerOptions options_;
  const std::string plugin_path_;
  const std::string folder_;  // <plugin_dir>/<driver>
  RegistrationServer registration_;
  DraPluginService claims_;
  HealthBoard health_;
  std::shared_ptr<DraSocket> dra_;
  bool stopped_ = false;
  // The socket watch (Guard); the servers are its while it runs.
  int inotify_fd_ = -1;
  int wake_fd_ = -1;
  int registry_wd_ = -1;
  int folder_wd_ = -1;
  std::thread guard_;
  std::atomic<uint64_t> heals_{0};
};

absl::Status DraServer::Impl::Start() {
  // The kubelet's folders are 0750; so is the plugin's own, whatever the
  // umask, and neither may be another user's to write.
  if (absl::Status s = MakeTrustedFolder(folder_, 0750, "dra.pluginDir"); !s.ok()) return s;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0 || health_.opened_fd() < 0) {
    return absl::UnavailableError(StrCat("cannot make an eventfd: ", std::strerror(errno)));
  }
  if (absl::Status s = ServeDra(); !s.ok()) return s;
  if (absl::Status s = registration_.Serve(); !s.ok()) return s;
  LogInfo("DRA plugin serving", {{"driver", options_.driver_name},
                                 {"registration", registration_.socket_path()},
                                 {"endpoint", plugin_path_}});
  // Watch both sockets and their folders: one someone removes is made and
  // served again.
  inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_fd_ < 0 || !WatchFolders().ok()) {
    LogWarning("cannot watch the DRA sockets; one removed is not served again",
               {{"error", std::strerror(errno)}});
    if (inotify_fd_ >= 0) ::close(inotify_fd_);
    inotify_fd_ = -1;  // poll passes it over
  }
  guard_ = std::thread([this] {
    NameThisThread("dra-sockets");
    Guard();
  });
  return absl::OkStatus();
}

absl::Status DraServer::Impl::ServeDra() {
  if (dra_) RetireDra(std::chrono::system_clock::now());
  auto socket = std::make_shared<DraSocket>();
  DraSocket* raw = socket.get();
  absl::StatusOr<std::unique_ptr<grpcserver::CqServer>> server =
      grpcserver::CqServer::Start({plugin_path_, kDraSocketSettings, "dra-serve"},
                                  {&raw->dra.v1, &raw->dra.v1beta1, &raw->health.v1,
                                   &raw->health.v1beta1, &raw->health.v1alpha1},
                                  [this, raw](grpcserver::CqServer& s) {
                                    claims_.Ask(s, raw->dra);
                                    health_.Ask(s, raw->health);
                                  });
  if (!server.ok()) return server.status();
  socket->server = *std::move(server);
  dra_ = std::move(socket);
  return absl::OkStatus();
}

void DraServer::Impl::RetireDra(std::chrono::system_clock::time_point deadline) {
  if (!dra_) return;
  dra_->server->Shutdown(deadline);
  claims_.Retire(std::move(dra_));
  dra_.reset();
}

// Watches the registry folder and <plugin_dir>/<driver>/ for a socket
// leaving them and for their own removal or move; a folder made again is
// watched anew (its old watch dropped).
absl::Status DraServer::Impl::WatchFolders() {
  constexpr uint32_t kMask = IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
  const std::pair<const std::string*, int*> folders[] = {{&options_.registry_dir, &registry_wd_},
                                                         {&folder_, &folder_wd_}};
  for (const auto& [path, wd] : folders) {
    const int now = ::inotify_add_watch(inotify_fd_, path->c_str(), kMask);
    if (now < 0) {
      return absl::UnavailableError(StrCat("cannot watch \"", *path, "\": ", std::strerror(errno)));
    }
    if (*wd >= 0 && *wd != now) ::inotify_rm_watch(inotify_fd_, *wd);
    *wd = now;
  }
  return absl::OkStatus();
}

// A folder of ours gone (the kubelet's folders wiped, node maintenance) is
// made again, its parents too, so its socket can be served again.
absl::Status DraServer::Impl::MakeFoldersAgain() {
  for (const std::string* path : {&options_.registry_dir, &folder_}) {
    struct stat st;
    if (::stat(path->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    LogWarning("a DRA socket folder is gone; making it again", {{"folder", *path}});
    if (absl::Status s = MakeTrustedFolder(*path, 0750, "a DRA socket folder"); !s.ok()) {
      return absl::UnavailableError(s.message());
    }
  }
  return WatchFolders();
}

// The socket watch: a socket of ours gone from its path (removed, or
// replaced, or its folder removed) is served again, as the kubelet's plugin
// watcher then registers the plugin anew. A failure is tried again after a
// second. And the health streams' heartbeat: while one is open, the current
// list again every health_resend (see DraServerOptions).
void DraServer::Impl::Guard() {
  alignas(inotify_event) char buf[4096];
  using Clock = std::chrono::steady_clock;
  Clock::time_point retry_at = Clock::time_point::max();
  Clock::time_point resend_at = Clock::time_point::max();
  for (;;) {
    const Clock::time_point due = std::min(retry_at, resend_at);
    pollfd fds[3] = {
        {inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {health_.opened_fd(), POLLIN, 0}};
    const int n = ::poll(fds, 3, PollTimeoutMs(due));
    if (n < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[2].revents != 0) {
      uint64_t count;
      (void)!::read(health_.opened_fd(), &count, sizeof count);
    }
    resend_at = health_.ResendIfDue();
    const bool changed = fds[0].revents != 0;
    if (changed) {
      while (::read(inotify_fd_, buf, sizeof buf) > 0) {
      }
    }
    if (!changed && Clock::now() < retry_at) continue;
    retry_at = Heal() ? Clock::time_point::max() : Clock::now() + std::chrono::seconds(1);
  }
}

bool DraServer::Impl::Heal() {
  if (absl::Status s = MakeFoldersAgain(); !s.ok()) {
    LogError("cannot make the DRA socket folders again; retrying",
             {{"error", std::string(s.message())}});
    return false;
  }
  bool healed = true;
  if (registration_.Gone()) {
    if (registration_.serving()) {  // not after a failed attempt
      LogWarning("the DRA registration socket is gone; serving it again",
                 {{"socket", registration_.socket_path()}});
      registration_.Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    }
    if (absl::Status s = registration_.Serve(); !s.ok()) {
      LogError("cannot serve the DRA registration socket again; retrying",
               {{"error", std::string(s.message())}});
      healed = false;
    } else {
      ++heals_;
    }
  }
  if (DraGone()) {
    // The calls in flight finish; the health streams are cancelled (the
    // kubelet opens them again).
    if (dra_) {  // not after a failed attempt
      LogWarning("the DRA socket is gone; serving it again", {{"socket", plugin_path_}});
      RetireDra(std::chrono::system_clock::now() + std::chrono::seconds(1));
    }
    if (absl::Status s = ServeDra(); !s.ok()) {
      LogError("cannot serve the DRA socket again; retrying",
               {{"error", std::string(s.message())}});
      healed = false;
    } else {
      ++heals_;
    }
  }
  return healed;
}

void DraServer::Impl::Stop(std::chrono::milliseconds deadline) {
  if (stopped_) return;
  stopped_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  if (guard_.joinable()) guard_.join();
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  inotify_fd_ = wake_fd_ = -1;
  registration_.Shutdown(std::chrono::system_clock::now() + deadline);
  health_.CloseAll();
  claims_.Refuse();
  if (dra_) dra_->server->Shutdown(std::chrono::system_clock::now() + deadline);
  // The batch running may still answer its call: the server goes after it.
  claims_.Join();
  dra_.reset();
}

ClaimCallStats DraServer::Impl::stats() const {
  const ClaimCallCounts counts = claims_.counts();
  ClaimCallStats out;
  out.prepare_calls = counts.prepare_calls;
  out.unprepare_calls = counts.unprepare_calls;
  out.claim_errors = counts.claim_errors;
  out.socket_heals = heals_.load();
  out.health_streams = health_.streams();
  out.health_resends = health_.resends();
  return out;
}

DraServer::DraServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DraServer::~DraServer() { Stop(); }

absl::StatusOr<std::unique_ptr<DraServer>> DraServer::Start(const DraServerOptions& options,
                                                            std::shared_ptr<ClaimHandler> handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  if (absl::Status s = impl->Start(); !s.ok()) {
    impl->Stop(std::chrono::milliseconds(0));
    return s;
  }
  return std::unique_ptr<DraServer>(new DraServer(std::move(impl)));
}

void DraServer::Stop(std::chrono::milliseconds deadline) { impl_->Stop(deadline); }
void DraServer::SetHealth(std::vector<DeviceHealthRecord> devices) {
  impl_->SetHealth(std::move(devices));
}
void DraServer::SetHealthServing(bool serving) { impl_->SetHealthServing(serving); }
RegistrationState DraServer::registration() const { return impl_->registration(); }
bool DraServer::WaitRegistered(std::chrono::milliseconds within) const {
  return impl_->WaitRegistered(within);
}
ClaimCallStats DraServer::stats() const { return impl_->stats(); }
const std::string& DraServer::registration_socket() const { return impl_->registration_socket(); }
const std::string& DraServer::plugin_socket() const { return impl_->plugin_socket(); }

}  // namespace gpu_agent::dra
