#include "dra_kubelet.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "dra/dra_v1.grpc.pb.h"
#include "dra/dra_v1beta1.grpc.pb.h"
#include "dra/health_v1.grpc.pb.h"
#include "dra/health_v1alpha1.grpc.pb.h"
#include "dra/health_v1beta1.grpc.pb.h"
#include "dra/registration.grpc.pb.h"
#include "support/test_support.h"

namespace gpu_agent::testing {
namespace {

namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A connection of its own, as the kubelet dials each time: a socket that
// refused an earlier attempt is not held in gRPC's reconnect backoff.
std::shared_ptr<grpc::Channel> Dial(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args);
}

// A prepare or unprepare request naming `claims` (both carry the same Claim).
template <class Request>
Request ClaimsRequest(const std::vector<dra::ClaimRef>& claims) {
  Request req;
  for (const dra::ClaimRef& c : claims) {
    auto* pc = req.add_claims();
    pc->set_namespace_(c.name_space);
    pc->set_uid(c.uid);
    pc->set_name(c.name);
  }
  return req;
}

template <class Stub, class Request, class Response>
grpc::Status CallPrepare(const std::shared_ptr<grpc::Channel>& channel,
                         std::chrono::milliseconds deadline,
                         const std::vector<dra::ClaimRef>& claims,
                         std::map<std::string, dra::PrepareOutcome>* out,
                         grpc::ClientContext* ctx) {
  auto stub = Stub(channel);
  const Request req = ClaimsRequest<Request>(claims);
  Response resp;
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
  grpc::Status s = stub.NodePrepareResources(ctx, req, &resp);
  if (!s.ok()) return s;
  for (const auto& [uid, r] : resp.claims()) {
    dra::PrepareOutcome o;
    o.error = r.error();
    for (const auto& d : r.devices()) {
      dra::PreparedDevice pd;
      pd.request_names.assign(d.request_names().begin(), d.request_names().end());
      pd.pool = d.pool_name();
      pd.device = d.device_name();
      pd.cdi_ids.assign(d.cdi_device_ids().begin(), d.cdi_device_ids().end());
      pd.share_id = d.share_id();
      o.devices.push_back(std::move(pd));
    }
    (*out)[uid] = std::move(o);
  }
  return s;
}

template <class Stub, class Request, class Response>
grpc::Status CallUnprepare(const std::shared_ptr<grpc::Channel>& channel,
                           std::chrono::milliseconds deadline,
                           const std::vector<dra::ClaimRef>& claims,
                           std::map<std::string, std::string>* out, grpc::ClientContext* ctx) {
  auto stub = Stub(channel);
  const Request req = ClaimsRequest<Request>(claims);
  Response resp;
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
  grpc::Status s = stub.NodeUnprepareResources(ctx, req, &resp);
  if (!s.ok()) return s;
  for (const auto& [uid, r] : resp.claims()) (*out)[uid] = r.error();
  return s;
}

}  // namespace

class DraKubelet::Tracked {
 public:
  Tracked(DraKubelet* k, const std::string& driver) : k_(k) {
    std::lock_guard<std::mutex> lock(k_->mu_);
    k_->calls_[&ctx] = driver;
  }
  ~Tracked() {
    std::lock_guard<std::mutex> lock(k_->mu_);
    k_->calls_.erase(&ctx);
  }
  grpc::ClientContext ctx;

 private:
  DraKubelet* const k_;
};

DraKubelet::DraKubelet(Options options) : options_(std::move(options)) {}

DraKubelet::~DraKubelet() {
  StopHealthWatch();
  Stop();
}

bool DraKubelet::Start() {
  inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (inotify_fd_ < 0 || wake_fd_ < 0) return false;
  if (::inotify_add_watch(inotify_fd_, options_.registry_dir.c_str(),
                          IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0) {
    return false;
  }
  ScanFolder();
  watcher_ = std::thread([this] { Watch(); });
  return true;
}

void DraKubelet::Stop() {
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  if (watcher_.joinable()) watcher_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(workers_mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  inotify_fd_ = wake_fd_ = -1;
  std::lock_guard<std::mutex> lock(mu_);
  plugins_.clear();
}

bool DraKubelet::Restart() {
  Stop();
  return Start();
}

void DraKubelet::ScanFolder() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.registry_dir, ec)) {
    // As the kubelet's plugin watcher, a name starting with '.' is skipped.
    if (entry.is_socket() && !entry.path().filename().string().starts_with('.')) {
      Register(entry.path().string());
    }
  }
}

void DraKubelet::Watch() {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) return;
    const ssize_t n = ::read(inotify_fd_, buf, sizeof buf);
    for (ssize_t off = 0; off < n;) {
      auto* ev = reinterpret_cast<inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->len == 0 || ev->name[0] == '.') continue;  // skipped, as ScanFolder does
      const std::string path = options_.registry_dir + "/" + ev->name;
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
        RegisterLater(path);
      } else {
        Forget(path);
      }
    }
  }
}

// As the kubelet's operation executor: each socket's registration on its
// own (a plugin that does not answer holds up no other). One attempt here;
// the retries, if it failed, on a thread of their own.
void DraKubelet::Register(const std::string& socket) {
  pluginregistration::PluginInfo info;
  if (GetInfo(socket, &info)) {
    Complete(socket, info);
    return;
  }
  std::error_code ec;
  if (!std::filesystem::exists(socket, ec)) return;
  std::lock_guard<std::mutex> lock(workers_mu_);
  workers_.emplace_back([this, socket] { RegisterWithRetries(socket, 1); });
}

void DraKubelet::RegisterLater(const std::string& socket) {
  std::lock_guard<std::mutex> lock(workers_mu_);
  workers_.emplace_back([this, socket] { RegisterWithRetries(socket, 0); });
}

bool DraKubelet::GetInfo(const std::string& socket, pluginregistration::PluginInfo* info) {
  pluginregistration::Registration::Stub stub(Dial(socket));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.get_info_deadline);
  grpc::Status s = stub.GetInfo(&ctx, pluginregistration::InfoRequest(), info);
  if (s.ok()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  errors_.push_back("GetInfo on " + socket + ": " + s.error_message());
  return false;
}

void DraKubelet::RegisterWithRetries(const std::string& socket, int attempt) {
  // As the kubelet's reconciler: a registration that fails is tried again,
  // 0.5 s then doubling, while the socket is there (a socket file can
  // appear before its server listens).
  std::chrono::milliseconds backoff(500 << attempt);
  for (;; ++attempt) {
    if (attempt > 0) {
      pollfd stop = {wake_fd_, POLLIN, 0};
      if (::poll(&stop, 1, static_cast<int>(backoff.count() / 2)) > 0) return;  // Stop() asked
    }
    pluginregistration::PluginInfo info;
    if (GetInfo(socket, &info)) {
      Complete(socket, info);
      return;
    }
    std::error_code ec;
    if (attempt == 5 || !std::filesystem::exists(socket, ec)) return;
    backoff *= 2;
  }
}

void DraKubelet::Complete(const std::string& socket, const pluginregistration::PluginInfo& info) {
  if (info.type() != "DRAPlugin") return;  // another plugin type's business
  // The plugin's order decides: the first of its versions this kubelet knows.
  std::string version;
  for (const std::string& v : info.supported_versions()) {
    if (std::find(options_.known_versions.begin(), options_.known_versions.end(), v) !=
        options_.known_versions.end()) {
      version = v;
      break;
    }
  }
  std::string refusal = options_.refuse_reason;
  if (refusal.empty() && version.empty()) {
    refusal = "none of the versions the plugin supports is known to this kubelet";
  }
  if (refusal.empty()) {
    // One plugin instance cannot take over the endpoint of another
    // (DRAPluginManager.add); the same socket registering again replaces
    // its own entry.
    std::lock_guard<std::mutex> lock(mu_);
    for (const Plugin& other : plugins_[info.name()]) {
      if (other.endpoint == info.endpoint() && other.socket != socket) {
        refusal = "endpoint " + info.endpoint() + " already registered for DRA driver plugin " +
                  info.name();
      }
    }
  }
  // As the kubelet's plugin manager: a refused plugin is told so; an
  // accepted one is registered (the DRA handler records and dials it) and
  // told only then, so a plugin that hears it is registered is called.
  auto notify = [&](bool registered) {
    pluginregistration::Registration::Stub stub(Dial(socket));
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(registered);
    status.set_error(refusal);
    grpc::ClientContext notify_ctx;
    notify_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pluginregistration::RegistrationStatusResponse ignored;
    grpc::Status ns = stub.NotifyRegistrationStatus(&notify_ctx, status, &ignored);
    std::lock_guard<std::mutex> lock(mu_);
    if (!ns.ok())
      errors_.push_back("NotifyRegistrationStatus on " + socket + ": " + ns.error_message());
  };
  if (!refusal.empty()) {
    notify(false);
    std::lock_guard<std::mutex> lock(mu_);
    ++refusals_;
    return;
  }
  Plugin p;
  p.socket = socket;
  p.name = info.name();
  p.endpoint = info.endpoint();
  p.channel = Dial(p.endpoint);
  p.version = version;
  p.supported_versions.assign(info.supported_versions().begin(), info.supported_versions().end());
  for (const std::string& v : options_.known_health_versions) {
    if (std::find(p.supported_versions.begin(), p.supported_versions.end(), v) !=
        p.supported_versions.end()) {
      p.health_version = v;
      break;
    }
  }
  // Dialled at once, as the kubelet's conn.Connect(): whether it is up is
  // known before the first call. (gRPC C++ moves a connection on only
  // while someone waits on it, so this waits, briefly.)
  p.channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(1));
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Gone meanwhile (Forget ran while this registered): not kept.
    std::error_code ec;
    if (!std::filesystem::exists(socket, ec)) return;
    std::vector<Plugin>& list = plugins_[p.name];
    std::erase_if(list, [&](const Plugin& old) { return old.socket == socket; });
    list.push_back(p);
    ++registrations_;
  }
  notify(true);
}

void DraKubelet::Forget(const std::string& socket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [name, list] : plugins_) {
    std::erase_if(list, [&](const Plugin& p) { return p.socket == socket; });
  }
  std::erase_if(plugins_, [](const auto& entry) { return entry.second.empty(); });
}

std::optional<DraKubelet::Plugin> DraKubelet::plugin(const std::string& driver) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plugins_.find(driver);
  if (it == plugins_.end() || it->second.empty()) return std::nullopt;
  // DRAPluginManager.get: the most recent connected one, else the most
  // recent.
  const std::vector<Plugin>& list = it->second;
  for (auto p = list.rbegin(); p != list.rend(); ++p) {
    // Connected, or connecting again at once, as the kubelet asks gRPC to
    // after each end of a connection.
    if (p->channel->GetState(true) == GRPC_CHANNEL_READY ||
        p->channel->WaitForConnected(std::chrono::system_clock::now() +
                                     std::chrono::milliseconds(100))) {
      return *p;
    }
  }
  return list.back();
}

std::vector<DraKubelet::Plugin> DraKubelet::plugins(const std::string& driver) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plugins_.find(driver);
  return it == plugins_.end() ? std::vector<Plugin>{} : it->second;
}

bool DraKubelet::WaitForPlugin(const std::string& driver, std::chrono::milliseconds timeout) const {
  return WaitFor([&] { return plugin(driver).has_value(); }, timeout);
}

int DraKubelet::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

int DraKubelet::refusals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusals_;
}

std::vector<std::string> DraKubelet::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

grpc::Status DraKubelet::Prepare(const std::string& driver,
                                 const std::vector<dra::ClaimRef>& claims,
                                 std::map<std::string, dra::PrepareOutcome>* out) {
  std::optional<Plugin> p = plugin(driver);
  if (!p) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, driver + " not registered");
  Tracked call(this, driver);
  if (p->version == "v1.DRAPlugin") {
    return CallPrepare<v1::DRAPlugin::Stub, v1::NodePrepareResourcesRequest,
                       v1::NodePrepareResourcesResponse>(p->channel, options_.call_deadline, claims,
                                                         out, &call.ctx);
  }
  return CallPrepare<v1beta1::DRAPlugin::Stub, v1beta1::NodePrepareResourcesRequest,
                     v1beta1::NodePrepareResourcesResponse>(p->channel, options_.call_deadline,
                                                            claims, out, &call.ctx);
}

grpc::Status DraKubelet::Unprepare(const std::string& driver,
                                   const std::vector<dra::ClaimRef>& claims,
                                   std::map<std::string, std::string>* out) {
  std::optional<Plugin> p = plugin(driver);
  if (!p) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, driver + " not registered");
  Tracked call(this, driver);
  if (p->version == "v1.DRAPlugin") {
    return CallUnprepare<v1::DRAPlugin::Stub, v1::NodeUnprepareResourcesRequest,
                         v1::NodeUnprepareResourcesResponse>(p->channel, options_.call_deadline,
                                                             claims, out, &call.ctx);
  }
  return CallUnprepare<v1beta1::DRAPlugin::Stub, v1beta1::NodeUnprepareResourcesRequest,
                       v1beta1::NodeUnprepareResourcesResponse>(p->channel, options_.call_deadline,
                                                                claims, out, &call.ctx);
}

std::vector<std::string> DraKubelet::ContainerCdiIds(const dra::PrepareOutcome& claim,
                                                     const std::string& request) {
  std::vector<std::string> out;
  for (const dra::PreparedDevice& d : claim.devices) {
    const auto& names = d.request_names;
    if (request.empty() || names.empty() ||
        std::find(names.begin(), names.end(), request) != names.end()) {
      out.insert(out.end(), d.cdi_ids.begin(), d.cdi_ids.end());
    }
  }
  return out;
}

bool DraKubelet::DropConnection(const std::string& driver) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plugins_.find(driver);
  if (it == plugins_.end() || it->second.empty()) return false;
  for (const auto& [ctx, d] : calls_) {
    if (d != driver) continue;
    ctx->TryCancel();
    ++dropped_calls_;
  }
  // The old channels go with the last call holding them.
  for (Plugin& p : it->second) p.channel = Dial(p.endpoint);
  return true;
}

int DraKubelet::dropped_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_calls_;
}

namespace {

using HealthList = std::vector<DraKubelet::Health>;

// Reads a NodeWatchResources stream of one version's stub (all three take
// v1alpha1's messages), handing each list to `on_list` until it answers
// false or the stream ends.
template <class Service>
grpc::Status ReadHealth(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx,
                        const std::function<bool(HealthList)>& on_list) {
  typename Service::Stub stub(channel);
  auto reader = stub.NodeWatchResources(ctx, ::v1alpha1::NodeWatchResourcesRequest());
  ::v1alpha1::NodeWatchResourcesResponse msg;
  while (reader->Read(&msg)) {
    HealthList list;
    for (const auto& d : msg.devices()) {
      list.push_back({d.device().pool_name(), d.device().device_name(),
                      d.health() == ::v1alpha1::HEALTHY, d.message()});
    }
    if (!on_list(std::move(list))) {
      ctx->TryCancel();
      (void)reader->Finish();
      return grpc::Status::OK;
    }
  }
  return reader->Finish();
}

grpc::Status ReadHealthOn(const DraKubelet::Plugin& p, grpc::ClientContext* ctx,
                          const std::function<bool(HealthList)>& on_list) {
  if (p.health_version == "v1.DRAResourceHealth") {
    return ReadHealth<::v1::DRAResourceHealth>(p.channel, ctx, on_list);
  }
  if (p.health_version == "v1beta1.DRAResourceHealth") {
    return ReadHealth<::v1beta1::DRAResourceHealth>(p.channel, ctx, on_list);
  }
  return ReadHealth<::v1alpha1::DRAResourceHealth>(p.channel, ctx, on_list);
}

}  // namespace

grpc::Status DraKubelet::FirstHealth(const std::string& driver, std::vector<Health>* out,
                                     std::chrono::milliseconds timeout) {
  std::optional<Plugin> p = plugin(driver);
  if (!p || !p->health()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, driver + " serves no health");
  }
  Tracked call(this, driver);
  call.ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  return ReadHealthOn(*p, &call.ctx, [out](HealthList list) {
    *out = std::move(list);
    return false;
  });
}

bool DraKubelet::WatchHealth(const std::string& driver) {
  std::optional<Plugin> p = plugin(driver);
  if (!p || !p->health()) return false;
  StopHealthWatch();
  {
    std::lock_guard<std::mutex> lock(mu_);
    health_lists_ = 0;
    last_health_.clear();
    health_watch_end_.reset();
    health_watch_stopping_ = false;
  }
  health_watch_ = std::thread([this, driver, plugin = *p] {
    Tracked call(this, driver);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (health_watch_stopping_) {
        health_watch_end_ = grpc::Status::CANCELLED;
        return;
      }
      health_watch_ctx_ = &call.ctx;
    }
    grpc::Status end = ReadHealthOn(plugin, &call.ctx, [this](HealthList list) {
      std::lock_guard<std::mutex> lock(mu_);
      ++health_lists_;
      last_health_ = std::move(list);
      return true;
    });
    std::lock_guard<std::mutex> lock(mu_);
    health_watch_ctx_ = nullptr;
    health_watch_end_ = end;
  });
  return true;
}

void DraKubelet::StopHealthWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    health_watch_stopping_ = true;
    if (health_watch_ctx_ != nullptr) health_watch_ctx_->TryCancel();
  }
  if (health_watch_.joinable()) health_watch_.join();
}

int DraKubelet::health_lists() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_lists_;
}

std::vector<DraKubelet::Health> DraKubelet::last_health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_health_;
}

std::optional<grpc::Status> DraKubelet::health_watch_end() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_watch_end_;
}

}  // namespace gpu_agent::testing
