#include "dra/dra_server.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

#include "base/file_util.h"
#include "base/log.h"
#include "base/poll_driven.h"
#include "base/socket_path.h"
#include "base/strings.h"
#include "base/text.h"
#include "base/thread_name.h"
#include "dra/dra_v1.grpc.pb.h"
#include "dra/dra_v1beta1.grpc.pb.h"
#include "dra/health_v1.grpc.pb.h"
#include "dra/health_v1alpha1.grpc.pb.h"
#include "dra/health_v1beta1.grpc.pb.h"
#include "dra/registration.grpc.pb.h"

namespace gpu_agent::dra {
namespace {

namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;
// The health services' packages are plain "v1", "v1beta1" and "v1alpha1"
// (::v1 and ::v1beta1, which the DRA service's aliases above hide); all
// three take v1alpha1's messages.
using HealthResponse = ::v1alpha1::NodeWatchResourcesResponse;

constexpr char kSocketSettings[] = "dra.registryDir, dra.pluginDir or dra.driverName";

template <class Request>
std::vector<ClaimRef> ClaimsOf(const Request& request) {
  std::vector<ClaimRef> out;
  out.reserve(request.claims_size());
  for (const auto& c : request.claims()) out.push_back({c.namespace_(), c.uid(), c.name()});
  return out;
}

// Every claim asked is answered: one the handler left out gets an error
// rather than silence (the kubelet would wait for it until its deadline).
template <class Response>
uint64_t FillPrepare(const std::vector<ClaimRef>& claims,
                     const std::map<std::string, PrepareOutcome>& outcomes, Response* response) {
  uint64_t errors = 0;
  auto& out = *response->mutable_claims();
  for (const ClaimRef& c : claims) {
    auto& r = out[c.uid];
    auto it = outcomes.find(c.uid);
    if (it == outcomes.end()) {
      r.set_error(StrCat("claim ", c.name_space, "/", c.name, " (", c.uid, ") was not answered"));
      ++errors;
      continue;
    }
    r.set_error(it->second.error);
    if (!it->second.error.empty()) ++errors;
    for (const PreparedDevice& d : it->second.devices) {
      auto* pd = r.add_devices();
      for (const std::string& n : d.request_names) pd->add_request_names(n);
      pd->set_pool_name(d.pool);
      pd->set_device_name(d.device);
      for (const std::string& id : d.cdi_ids) pd->add_cdi_device_ids(id);
    }
  }
  return errors;
}

template <class Response>
uint64_t FillUnprepare(const std::vector<ClaimRef>& claims,
                       const std::map<std::string, std::string>& errors, Response* response) {
  uint64_t count = 0;
  auto& out = *response->mutable_claims();
  for (const ClaimRef& c : claims) {
    auto it = errors.find(c.uid);
    const std::string error = it == errors.end() ? "" : it->second;
    out[c.uid].set_error(error);
    if (!error.empty()) ++count;
  }
  return count;
}

// The one thread prepare and unprepare run on, in order of arrival.
class ClaimsThread {
 public:
  ClaimsThread() {
    thread_ = std::thread([this] {
      NameThisThread("dra-claims");
      Run();
    });
  }
  ~ClaimsThread() { Join(); }

  // `run` does the work; `refuse` answers instead once the server stops.
  void Post(std::function<void()> run, std::function<void()> refuse) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_) {
        jobs_.push_back({std::move(run), std::move(refuse)});
        cv_.notify_one();
        return;
      }
    }
    refuse();
  }

  // Jobs not started are refused from here on; the one running finishes.
  void Refuse() {
    std::deque<Job> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      left.swap(jobs_);
    }
    for (Job& j : left) j.refuse();
  }

  void Join() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    Refuse();
  }

 private:
  struct Job {
    std::function<void()> run;
    std::function<void()> refuse;
  };

  void Run() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job.run();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;   // protected by mu_
  bool stopping_ = false;  // protected by mu_: new jobs are refused
  bool done_ = false;      // protected by mu_: the thread ends once idle
  std::thread thread_;
};

}  // namespace

namespace {

std::string RegistrationSocketPath(const DraServerOptions& o, std::string_view tag) {
  return StrCat(o.registry_dir, "/", o.driver_name, tag.empty() ? "" : "-", tag, "-reg.sock");
}

std::string PluginSocketPath(const DraServerOptions& o, std::string_view tag) {
  return StrCat(o.plugin_dir, "/", o.driver_name, "/dra", tag.empty() ? "" : "-", tag, ".sock");
}

}  // namespace

std::string InstanceTag(const DraServerOptions& o) {
  if (RegistrationSocketPath(o, o.instance).size() <= kMaxSocketPath &&
      PluginSocketPath(o, o.instance).size() <= kMaxSocketPath) {
    return o.instance;
  }
  return o.instance.substr(0, 8);
}

std::string RegistrationSocketPath(const DraServerOptions& o) {
  return RegistrationSocketPath(o, InstanceTag(o));
}

std::string PluginSocketPath(const DraServerOptions& o) {
  return PluginSocketPath(o, InstanceTag(o));
}

// The DRA versions first (the kubelet takes the first of them it knows),
// then the health stream's: a kubelet takes the newest of those it knows,
// and one that knows none ignores them.
const std::vector<std::string>& SupportedVersions() {
  static const auto* versions =
      new std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                   "v1beta1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"};
  return *versions;
}

// The kubelet keeps at most this much of a device's health message.
constexpr size_t kHealthMessageMax = 1024;

// A proto3 string must be UTF-8 (the kubelet's decoder refuses the whole
// message otherwise): a reason's stray bytes become U+FFFD, and the cut
// falls between characters.
std::string HealthMessage(const std::string& reason) { return Utf8Clip(reason, kHealthMessageMax); }

class DraServer::Impl {
 private:
  class HealthStream;

 public:
  Impl(DraServerOptions options, std::shared_ptr<ClaimHandler> handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        registration_path_(RegistrationSocketPath(options_)),
        plugin_path_(PluginSocketPath(options_)),
        folder_(StrCat(options_.plugin_dir, "/", options_.driver_name)) {}

  absl::Status Start() {
    // The kubelet's folders are 0750; so is the plugin's own, whatever the
    // umask, and neither may be another user's to write.
    if (absl::Status s = MakeTrustedFolder(folder_, 0750, "dra.pluginDir"); !s.ok()) return s;
    // Before serving: a health stream's callback signals streams_fd_.
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    streams_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0 || streams_fd_ < 0) {
      return absl::UnavailableError(StrCat("cannot make an eventfd: ", std::strerror(errno)));
    }
    if (absl::Status s = ServeDra(); !s.ok()) return s;
    if (absl::Status s = ServeRegistration(); !s.ok()) return s;
    LogInfo("DRA plugin serving", {{"driver", options_.driver_name},
                                   {"registration", registration_path_},
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

  // (Re)serves the DRA service on fresh service objects (a service serves
  // one server in its life).
  absl::Status ServeDra() {
    v1_service_ = std::make_unique<V1Service>(this);
    v1beta1_service_ = std::make_unique<V1beta1Service>(this);
    health_v1_service_ = std::make_unique<HealthV1Service>(this);
    health_v1beta1_service_ = std::make_unique<HealthV1beta1Service>(this);
    health_v1alpha1_service_ = std::make_unique<HealthV1alpha1Service>(this);
    absl::StatusOr<std::unique_ptr<grpc::Server>> dra =
        Serve(plugin_path_, {v1_service_.get(), v1beta1_service_.get(), health_v1_service_.get(),
                             health_v1beta1_service_.get(), health_v1alpha1_service_.get()});
    if (!dra.ok()) return dra.status();
    dra_server_ = *std::move(dra);
    plugin_inode_ = InodeOf(plugin_path_);
    return absl::OkStatus();
  }

  absl::Status ServeRegistration() {
    registration_service_ = std::make_unique<RegistrationService>(this);
    absl::StatusOr<std::unique_ptr<grpc::Server>> reg =
        Serve(registration_path_, {registration_service_.get()});
    if (!reg.ok()) return reg.status();
    registration_server_ = *std::move(reg);
    registration_inode_ = InodeOf(registration_path_);
    return absl::OkStatus();
  }

  // Watches the registry folder and <plugin_dir>/<driver>/ for a socket
  // leaving them and for their own removal or move; a folder made again is
  // watched anew (its old watch dropped).
  absl::Status WatchFolders() {
    constexpr uint32_t kMask = IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
    const std::pair<const std::string*, int*> folders[] = {{&options_.registry_dir, &registry_wd_},
                                                           {&folder_, &folder_wd_}};
    for (const auto& [path, wd] : folders) {
      const int now = ::inotify_add_watch(inotify_fd_, path->c_str(), kMask);
      if (now < 0) {
        return absl::UnavailableError(
            StrCat("cannot watch \"", *path, "\": ", std::strerror(errno)));
      }
      if (*wd >= 0 && *wd != now) ::inotify_rm_watch(inotify_fd_, *wd);
      *wd = now;
    }
    return absl::OkStatus();
  }

  // A folder of ours gone (the kubelet's folders wiped, node maintenance) is
  // made again, its parents too, so its socket can be served again.
  absl::Status MakeFoldersAgain() {
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
  // replaced, or its folder removed) is served again, as the kubelet's
  // plugin watcher then registers the plugin anew. A failure is tried again
  // after a second. And the health streams' heartbeat: while one is open,
  // the current list again every health_resend (see DraServerOptions).
  void Guard() {
    alignas(inotify_event) char buf[4096];
    using Clock = std::chrono::steady_clock;
    Clock::time_point retry_at = Clock::time_point::max();
    Clock::time_point resend_at = Clock::time_point::max();
    for (;;) {
      const Clock::time_point due = std::min(retry_at, resend_at);
      pollfd fds[3] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {streams_fd_, POLLIN, 0}};
      const int n = ::poll(fds, 3, PollTimeoutMs(due));
      if (n < 0 && errno != EINTR) return;
      if (fds[1].revents != 0) return;
      if (fds[2].revents != 0) {
        uint64_t count;
        (void)!::read(streams_fd_, &count, sizeof count);
      }
      resend_at = ResendHealthIfDue();
      const bool changed = fds[0].revents != 0;
      if (changed) {
        while (::read(inotify_fd_, buf, sizeof buf) > 0) {
        }
      }
      if (!changed && Clock::now() < retry_at) continue;
      retry_at = Clock::time_point::max();
      const Clock::time_point retry = Clock::now() + std::chrono::seconds(1);
      if (absl::Status s = MakeFoldersAgain(); !s.ok()) {
        LogError("cannot make the DRA socket folders again; retrying",
                 {{"error", std::string(s.message())}});
        retry_at = retry;
        continue;
      }
      if (InodeOf(registration_path_) != registration_inode_) {
        if (registration_server_) {  // null after a failed attempt
          LogWarning("the DRA registration socket is gone; serving it again",
                     {{"socket", registration_path_}});
          registration_server_->Shutdown(std::chrono::system_clock::now() +
                                         std::chrono::milliseconds(100));
          registration_server_.reset();
        }
        if (absl::Status s = ServeRegistration(); !s.ok()) {
          LogError("cannot serve the DRA registration socket again; retrying",
                   {{"error", std::string(s.message())}});
          registration_inode_ = 0;
          retry_at = retry;
        } else {
          ++heals_;
        }
      }
      if (InodeOf(plugin_path_) != plugin_inode_) {
        // The calls in flight finish; the health streams are cancelled
        // (the kubelet opens them again).
        if (dra_server_) {  // null after a failed attempt
          LogWarning("the DRA socket is gone; serving it again", {{"socket", plugin_path_}});
          dra_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
          dra_server_.reset();
        }
        if (absl::Status s = ServeDra(); !s.ok()) {
          LogError("cannot serve the DRA socket again; retrying",
                   {{"error", std::string(s.message())}});
          plugin_inode_ = 0;
          retry_at = retry;
        } else {
          ++heals_;
        }
      }
    }
  }

  void Stop(std::chrono::milliseconds deadline) {
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
    if (registration_server_) {
      registration_server_->Shutdown(std::chrono::system_clock::now() + deadline);
      RemoveIfOurs(registration_path_, registration_inode_);
    }
    CloseStreams();
    {
      // A stream opening from now on is refused (streams_closed_) and
      // signals nothing; one that opened before has signalled under the lock.
      std::lock_guard<std::mutex> lock(health_mu_);
      if (streams_fd_ >= 0) ::close(streams_fd_);
      streams_fd_ = -1;
    }
    claims_.Refuse();
    if (dra_server_) {
      dra_server_->Shutdown(std::chrono::system_clock::now() + deadline);
      RemoveIfOurs(plugin_path_, plugin_inode_);
    }
    claims_.Join();
  }

  void SetHealthServing(bool serving) {
    std::vector<HealthStream*> finish;
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      if (health_serving_ == serving) return;
      health_serving_ = serving;
      if (!serving) {
        std::vector<HealthStream*> all(streams_.begin(), streams_.end());
        for (HealthStream* st : all) {
          if (st->CloseLocked(NotServingHealth())) finish.push_back(st);
        }
      }
    }
    for (HealthStream* st : finish) st->Finish(NotServingHealth());
  }

  grpc::Status NotServingHealth() const {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        StrCat("another instance of ", options_.driver_name,
                               " on this node serves its devices' health"));
  }

  void SetHealth(std::vector<DeviceHealthRecord> devices) {
    std::vector<HealthStream*> write;
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      health_ = std::move(devices);
      PublishHealthLocked(&write);
    }
    // A stream with a write prepared cannot finish, so cannot be freed,
    // before that write completes.
    for (HealthStream* s : write) s->StartPrepared();
  }

  // REQUIRES: health_mu_ held. The current list is due on every stream
  // (`*write` gets those whose write the caller starts, without the lock).
  void PublishHealthLocked(std::vector<HealthStream*>* write) {
    health_updated_ = std::chrono::system_clock::now();
    health_published_ = std::chrono::steady_clock::now();
    ++health_version_;
    for (HealthStream* s : streams_) {
      if (s->PrepareWriteLocked()) write->push_back(s);
    }
  }

  // The kubelet takes a device it has heard nothing of for 30 s as of
  // unknown health (healthinfo.go, healthTimeout), whatever it was: while a
  // stream is open, the list goes out again health_resend after the last.
  // Sends it when that is due; returns when it is next due (max: no stream
  // open).
  std::chrono::steady_clock::time_point ResendHealthIfDue() {
    std::vector<HealthStream*> write;
    std::chrono::steady_clock::time_point due;
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      if (streams_.empty()) return std::chrono::steady_clock::time_point::max();
      if (std::chrono::steady_clock::now() >= health_published_ + options_.health_resend) {
        PublishHealthLocked(&write);
        ++health_resends_;
      }
      due = health_published_ + options_.health_resend;
    }
    for (HealthStream* s : write) s->StartPrepared();
    return due;
  }

  RegistrationState registration() const {
    std::lock_guard<std::mutex> lock(state_mu_);
    return registration_;
  }

  ClaimCallStats stats() const {
    ClaimCallStats out;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      out = stats_;
    }
    out.socket_heals = heals_.load();
    std::lock_guard<std::mutex> lock(health_mu_);
    out.health_streams = streams_.size();
    out.health_resends = health_resends_;
    return out;
  }

  const std::string& registration_socket() const { return registration_path_; }
  const std::string& plugin_socket() const { return plugin_path_; }

 private:
  class RegistrationService final : public pluginregistration::Registration::CallbackService {
   public:
    explicit RegistrationService(Impl* impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx,
                                      const pluginregistration::InfoRequest*,
                                      pluginregistration::PluginInfo* info) override {
      info->set_type("DRAPlugin");
      info->set_name(impl_->options_.driver_name);
      info->set_endpoint(impl_->plugin_path_);
      for (const std::string& v : SupportedVersions()) info->add_supported_versions(v);
      {
        std::lock_guard<std::mutex> lock(impl_->state_mu_);
        ++impl_->registration_.info_calls;
      }
      auto* reactor = ctx->DefaultReactor();
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }
    grpc::ServerUnaryReactor* NotifyRegistrationStatus(
        grpc::CallbackServerContext* ctx, const pluginregistration::RegistrationStatus* status,
        pluginregistration::RegistrationStatusResponse*) override {
      impl_->Notified(status->plugin_registered(), status->error());
      auto* reactor = ctx->DefaultReactor();
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }

   private:
    Impl* const impl_;
  };

  // One version of the DRA service; v1 and v1beta1 differ only in names.
  template <class Service, class PrepareRequest, class PrepareResponse, class UnprepareRequest,
            class UnprepareResponse>
  class DraService final : public Service {
   public:
    explicit DraService(Impl* impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* NodePrepareResources(grpc::CallbackServerContext* ctx,
                                                   const PrepareRequest* request,
                                                   PrepareResponse* response) override {
      auto* reactor = ctx->DefaultReactor();
      Impl* impl = impl_;
      impl->claims_.Post(
          [impl, reactor, request, response] {
            const std::vector<ClaimRef> claims = ClaimsOf(*request);
            const uint64_t errors = FillPrepare(claims, impl->handler_->Prepare(claims), response);
            impl->Counted(true, errors);
            reactor->Finish(grpc::Status::OK);
          },
          [reactor] { reactor->Finish(ShuttingDown()); });
      return reactor;
    }
    grpc::ServerUnaryReactor* NodeUnprepareResources(grpc::CallbackServerContext* ctx,
                                                     const UnprepareRequest* request,
                                                     UnprepareResponse* response) override {
      auto* reactor = ctx->DefaultReactor();
      Impl* impl = impl_;
      impl->claims_.Post(
          [impl, reactor, request, response] {
            const std::vector<ClaimRef> claims = ClaimsOf(*request);
            const uint64_t errors =
                FillUnprepare(claims, impl->handler_->Unprepare(claims), response);
            impl->Counted(false, errors);
            reactor->Finish(grpc::Status::OK);
          },
          [reactor] { reactor->Finish(ShuttingDown()); });
      return reactor;
    }

   private:
    static grpc::Status ShuttingDown() {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the DRA plugin is shutting down");
    }
    Impl* const impl_;
  };

  using V1Service = DraService<v1::DRAPlugin::CallbackService, v1::NodePrepareResourcesRequest,
                               v1::NodePrepareResourcesResponse, v1::NodeUnprepareResourcesRequest,
                               v1::NodeUnprepareResourcesResponse>;
  using V1beta1Service =
      DraService<v1beta1::DRAPlugin::CallbackService, v1beta1::NodePrepareResourcesRequest,
                 v1beta1::NodePrepareResourcesResponse, v1beta1::NodeUnprepareResourcesRequest,
                 v1beta1::NodeUnprepareResourcesResponse>;

  // One NodeWatchResources stream, of whichever version the kubelet took
  // (they share v1alpha1's messages): the current list at once, and again
  // after each change and each heartbeat, one write in flight, newer lists
  // coalesced. In the server's set (health_mu_) until it is finished; only
  // then freed, by gRPC's OnDone.
  class HealthStream final : public grpc::ServerWriteReactor<HealthResponse> {
   public:
    explicit HealthStream(Impl* impl) : impl_(impl) {}

    // REQUIRES: health_mu_ held. True when the current list is now the
    // stream's to write (it was not written and no write is in flight): the
    // caller then calls StartPrepared, without the lock.
    bool PrepareWriteLocked() {
      if (finishing_ || writing_ || sent_version_ == impl_->health_version_) return false;
      FillLocked();
      writing_ = true;
      return true;
    }
    void StartPrepared() { StartWrite(&message_); }

    // Finishes the stream unless it is already finishing.
    void Close(grpc::Status status) {
      bool finish_now;
      {
        std::lock_guard<std::mutex> lock(impl_->health_mu_);
        if (finishing_) return;
        finish_now = CloseLocked(std::move(status));
      }
      if (finish_now) Finish(status_);
    }

    // REQUIRES: health_mu_ held, not finishing. True when Finish is due now
    // (no write in flight); otherwise OnWriteDone calls it.
    bool CloseLocked(grpc::Status status) {
      finishing_ = true;
      status_ = std::move(status);
      impl_->streams_.erase(this);
      return !writing_;
    }

    void OnWriteDone(bool ok) override {
      enum { kNothing, kWrite, kFinish } next = kNothing;
      {
        std::lock_guard<std::mutex> lock(impl_->health_mu_);
        writing_ = false;
        if (!ok && !finishing_) {
          CloseLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broken"));
        }
        if (finishing_) {
          next = kFinish;
        } else if (PrepareWriteLocked()) {
          next = kWrite;
        }
      }
      if (next == kWrite) StartWrite(&message_);
      if (next == kFinish) Finish(status_);
    }

    void OnCancel() override { Close(grpc::Status::CANCELLED); }
    void OnDone() override { delete this; }

   private:
    void FillLocked() {
      message_.Clear();
      const int64_t updated = std::chrono::duration_cast<std::chrono::seconds>(
                                  impl_->health_updated_.time_since_epoch())
                                  .count();
      for (const DeviceHealthRecord& d : impl_->health_) {
        auto* h = message_.add_devices();
        h->mutable_device()->set_pool_name(d.pool);
        h->mutable_device()->set_device_name(d.device);
        h->set_health(d.healthy ? v1alpha1::HEALTHY : v1alpha1::UNHEALTHY);
        h->set_last_updated_time(updated);
        if (!d.message.empty()) h->set_message(HealthMessage(d.message));
      }
      sent_version_ = impl_->health_version_;
    }

    Impl* const impl_;
    // All protected by impl_->health_mu_; message_ is the write's while
    // writing_.
    bool writing_ = false;
    bool finishing_ = false;
    uint64_t sent_version_ = 0;
    grpc::Status status_;
    HealthResponse message_;
  };

  // The health service of one package (v1, v1beta1, v1alpha1).
  template <class Service>
  class HealthService final : public Service::CallbackService {
   public:
    explicit HealthService(Impl* impl) : impl_(impl) {}
    grpc::ServerWriteReactor<HealthResponse>* NodeWatchResources(
        grpc::CallbackServerContext*, const v1alpha1::NodeWatchResourcesRequest*) override {
      auto* stream = new HealthStream(impl_);
      bool closed, elsewhere = false, write = false;
      {
        std::lock_guard<std::mutex> lock(impl_->health_mu_);
        closed = impl_->streams_closed_;
        elsewhere = !closed && !impl_->health_serving_;
        if (!closed && !elsewhere) {
          // The first stream starts the heartbeat's clock.
          if (impl_->streams_.empty()) impl_->health_published_ = std::chrono::steady_clock::now();
          impl_->streams_.insert(stream);
          write = stream->PrepareWriteLocked();
          // The guard's wait recomputed (the heartbeat's due time).
          const uint64_t one = 1;
          if (impl_->streams_fd_ >= 0) (void)!::write(impl_->streams_fd_, &one, sizeof one);
        }
      }
      if (closed) stream->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
      if (elsewhere) stream->Close(impl_->NotServingHealth());
      if (write) stream->StartPrepared();
      return stream;
    }

   private:
    Impl* const impl_;
  };
  using HealthV1Service = HealthService<::v1::DRAResourceHealth>;
  using HealthV1beta1Service = HealthService<::v1beta1::DRAResourceHealth>;
  using HealthV1alpha1Service = HealthService<v1alpha1::DRAResourceHealth>;

  void CloseStreams() {
    std::vector<HealthStream*> finish;
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      streams_closed_ = true;
      std::vector<HealthStream*> all(streams_.begin(), streams_.end());
      for (HealthStream* s : all) {
        if (s->CloseLocked(grpc::Status::OK)) finish.push_back(s);
      }
    }
    for (HealthStream* s : finish) s->Finish(grpc::Status::OK);
  }

  void Notified(bool registered, const std::string& error) {
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      registration_.registered = registered;
      if (registered) {
        ++registration_.registrations;
      } else {
        ++registration_.refusals;
        registration_.last_refusal = error;
      }
    }
    if (registered) {
      LogInfo("registered with the kubelet as a DRA driver", {{"driver", options_.driver_name}});
    } else {
      // The kubelet tries again with its own backoff while the socket is
      // there; what it said is all an operator can go on.
      LogError("the kubelet refused the DRA driver's registration",
               {{"driver", options_.driver_name}, {"reason", error}});
    }
  }

  void Counted(bool prepare, uint64_t errors) {
    std::lock_guard<std::mutex> lock(state_mu_);
    ++(prepare ? stats_.prepare_calls : stats_.unprepare_calls);
    stats_.claim_errors += errors;
  }

  static absl::StatusOr<std::unique_ptr<grpc::Server>> Serve(
      const std::string& path, std::initializer_list<grpc::Service*> services) {
    if (absl::Status s = PrepareSocketPath(path, kSocketSettings); !s.ok()) return s;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
    for (grpc::Service* s : services) builder.RegisterService(s);
    // As the device-plugin server: no keepalive or BDP pings on a local
    // socket, where a peer's death closes the connection at once.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, std::numeric_limits<int>::max());
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (server == nullptr) {
      return absl::UnavailableError(
          StrCat("cannot serve on \"", path, "\" (gRPC could not bind; see its log above)"));
    }
    if (absl::Status s = SecureSocket(path); !s.ok()) {
      server->Shutdown();
      server->Wait();
      return s;
    }
    return server;
  }

  static void RemoveIfOurs(const std::string& path, ino_t inode) {
    if (inode != 0 && InodeOf(path) == inode) ::unlink(path.c_str());
  }

  const DraServerOptions options_;
  const std::shared_ptr<ClaimHandler> handler_;
  const std::string registration_path_;
  const std::string plugin_path_;
  const std::string folder_;  // <plugin_dir>/<driver>
  // Each outlives the server it serves (declared before them).
  std::unique_ptr<RegistrationService> registration_service_;
  std::unique_ptr<V1Service> v1_service_;
  std::unique_ptr<V1beta1Service> v1beta1_service_;
  std::unique_ptr<HealthV1Service> health_v1_service_;
  std::unique_ptr<HealthV1beta1Service> health_v1beta1_service_;
  std::unique_ptr<HealthV1alpha1Service> health_v1alpha1_service_;
  ClaimsThread claims_;
  std::unique_ptr<grpc::Server> dra_server_;
  std::unique_ptr<grpc::Server> registration_server_;
  ino_t plugin_inode_ = 0;
  ino_t registration_inode_ = 0;
  bool stopped_ = false;
  // The socket watch (Guard); the servers and inodes are its while it runs.
  int inotify_fd_ = -1;
  int wake_fd_ = -1;
  int streams_fd_ = -1;  // a health stream opened: the guard's wait is recomputed (health_mu_
                         // held to write it or to close it)
  int registry_wd_ = -1;
  int folder_wd_ = -1;
  std::thread guard_;
  std::atomic<uint64_t> heals_{0};

  mutable std::mutex state_mu_;
  RegistrationState registration_;  // protected by state_mu_
  ClaimCallStats stats_;            // protected by state_mu_

  mutable std::mutex health_mu_;
  std::vector<DeviceHealthRecord> health_;                  // protected by health_mu_
  std::chrono::system_clock::time_point health_updated_;    // protected by health_mu_
  uint64_t health_version_ = 1;                             // protected by health_mu_
  std::set<HealthStream*> streams_;                         // protected by health_mu_
  std::chrono::steady_clock::time_point health_published_;  // protected by health_mu_
  uint64_t health_resends_ = 0;                             // protected by health_mu_
  bool streams_closed_ = false;                             // protected by health_mu_
  bool health_serving_ = true;                              // protected by health_mu_
};

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
ClaimCallStats DraServer::stats() const { return impl_->stats(); }
const std::string& DraServer::registration_socket() const { return impl_->registration_socket(); }
const std::string& DraServer::plugin_socket() const { return impl_->plugin_socket(); }

}  // namespace gpu_agent::dra
