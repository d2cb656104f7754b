#include "kubelet_simulator.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "base/resource_name.h"

namespace gpu_agent::testing {

class KubeletSimulator::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(KubeletSimulator* sim) : sim_(sim) {}
  grpc::Status Register(grpc::ServerContext* ctx, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    {
      std::unique_lock<std::mutex> lock(sim_->mu_);
      ++sim_->register_calls_;
      if (!sim_->refuse_.empty()) return grpc::Status(grpc::StatusCode::UNKNOWN, sim_->refuse_);
      if (sim_->hold_) {
        ++sim_->held_;
        sim_->cv_.notify_all();
        // The server context has no wake-up on cancel: look now and then.
        while (sim_->hold_ && !ctx->IsCancelled()) {
          sim_->cv_.wait_for(lock, std::chrono::milliseconds(20));
        }
        --sim_->held_;
        if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      }
    }
    struct InFlight {
      KubeletSimulator* sim;
      std::string resource;
      InFlight(KubeletSimulator* s, std::string r) : sim(s), resource(std::move(r)) {
        std::lock_guard<std::mutex> lock(sim->mu_);
        sim->max_in_flight_ = std::max(sim->max_in_flight_, ++sim->in_flight_[resource]);
      }
      ~InFlight() {
        std::lock_guard<std::mutex> lock(sim->mu_);
        --sim->in_flight_[resource];
      }
    } in_flight(sim_, req->resource_name());
    // The real kubelet's checks and messages.
    if (req->version() != "v1beta1") {
      return grpc::Status(grpc::StatusCode::UNKNOWN,
                          "requested API version \"" + req->version() +
                              "\" is not supported by kubelet. Supported versions are "
                              "[\"v1beta1\"]");
    }
    if (!ValidateExtendedResourceName(req->resource_name()).ok()) {
      return grpc::Status(grpc::StatusCode::UNKNOWN,
                          "the ResourceName \"" + req->resource_name() + "\" is invalid");
    }
    return sim_->OnRegister(*req);
  }

 private:
  KubeletSimulator* sim_;
};

KubeletSimulator::Profile KubeletSimulator::ProfileFromEnv() {
  const char* v = std::getenv("KUBELET_SIM_PROFILE");
  if (v == nullptr || *v == '\0' || std::string(v) == "1.25") return Profile::k1_25;
  if (std::string(v) == "1.20") return Profile::k1_20;
  std::fprintf(stderr, "KUBELET_SIM_PROFILE=%s: expected 1.20 or 1.25\n", v);
  std::abort();
}

KubeletSimulator::KubeletSimulator(std::string dir, Profile profile)
    : dir_(std::move(dir)), profile_(profile) {}

KubeletSimulator::~KubeletSimulator() { Stop(); }

bool KubeletSimulator::Start() {
  ::unlink(socket().c_str());
  service_ = std::make_unique<RegistrationService>(this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket(), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  return server_ != nullptr;
}

void KubeletSimulator::DropClients() {
  std::vector<std::shared_ptr<Client>> clients;
  {
    std::lock_guard<std::mutex> lock(mu_);
    clients.swap(clients_);
    current_.clear();
    views_.clear();
  }
  for (auto& c : clients) c->stream_ctx.TryCancel();
  for (auto& c : clients) {
    if (c->reader.joinable()) c->reader.join();
  }
  // Readers that ended meanwhile may have marked views: a stopped kubelet
  // knows nothing.
  std::lock_guard<std::mutex> lock(mu_);
  views_.clear();
}

void KubeletSimulator::JoinFinishedClients() {
  std::vector<std::shared_ptr<Client>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = clients_.begin(); it != clients_.end();) {
      if ((*it)->done) {
        finished.push_back(*it);
        it = clients_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    if (c->reader.joinable()) c->reader.join();
  }
}

void KubeletSimulator::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  DropClients();
  ::unlink(socket().c_str());
}

bool KubeletSimulator::Restart() {
  Stop();
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string path = dir_ + "/" + e->d_name;
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
    }
    ::closedir(d);
  }
  return Start();
}

void KubeletSimulator::RefuseRegistrations(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_ = message;
}

void KubeletSimulator::HoldRegistrations(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = hold;
  }
  cv_.notify_all();
}

int KubeletSimulator::register_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return register_calls_;
}

int KubeletSimulator::held_registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

int KubeletSimulator::max_concurrent_registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_in_flight_;
}

void KubeletSimulator::MarkUnhealthyLocked(const std::string& resource) {
  View& v = views_[resource];
  for (auto& d : v.devices) d.set_health("Unhealthy");
  v.connected = false;
  ++v.disconnects;
  v.stopped_at = std::chrono::steady_clock::now();
}

grpc::Status KubeletSimulator::OnRegister(const v1beta1::RegisterRequest& req) {
  JoinFinishedClients();
  auto c = std::make_shared<Client>();
  c->resource = req.resource_name();
  c->endpoint = req.endpoint();
  c->channel = grpc::CreateChannel("unix://" + dir_ + "/" + req.endpoint(),
                                   grpc::InsecureChannelCredentials());
  std::shared_ptr<Client> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req);
    auto it = current_.find(c->resource);
    if (it != current_.end()) old = it->second;
    current_[c->resource] = c;
    clients_.push_back(c);
    if (profile_ == Profile::k1_20) views_[c->resource].connected = true;
  }
  if (profile_ == Profile::k1_20) {
    // Register returns at once; the endpoint is dialed on a thread of its
    // own, and the previous endpoint of the name stopped.
    if (old) old->stream_ctx.TryCancel();
    c->reader = std::thread([this, c] { RunClient(c); });
    cv_.notify_all();
    return grpc::Status::OK;
  }
  // 1.25+: the old client stays as it is. Connect: a blocking dial, then the
  // options, both inside Register.
  auto deregister = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    current_.erase(c->resource);
    c->done = true;
  };
  if (!c->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    deregister();
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        "failed to dial device plugin: context deadline exceeded");
  }
  {
    auto stub = v1beta1::DevicePlugin::NewStub(c->channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1beta1::Empty empty;
    v1beta1::DevicePluginOptions opts;
    grpc::Status s = stub->GetDevicePluginOptions(&ctx, empty, &opts);
    if (!s.ok()) {
      deregister();
      return grpc::Status(grpc::StatusCode::UNKNOWN,
                          "failed to get device plugin options: " + s.error_message());
    }
    std::lock_guard<std::mutex> lock(mu_);
    c->options = opts;
    views_[c->resource].connected = true;
  }
  c->reader = std::thread([this, c] { RunClient(c); });
  cv_.notify_all();
  return grpc::Status::OK;
}

void KubeletSimulator::RunClient(const std::shared_ptr<Client>& c) {
  auto stub = v1beta1::DevicePlugin::NewStub(c->channel);
  if (profile_ == Profile::k1_20) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1beta1::Empty empty;
    v1beta1::DevicePluginOptions opts;
    if (stub->GetDevicePluginOptions(&ctx, empty, &opts).ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      c->options = opts;
    }
  }
  v1beta1::Empty empty;
  auto reader = stub->ListAndWatch(&c->stream_ctx, empty);
  v1beta1::ListAndWatchResponse msg;
  while (reader->Read(&msg)) {
    Update u;
    u.at = std::chrono::steady_clock::now();
    u.devices.assign(msg.devices().begin(), msg.devices().end());
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto cur = current_.find(c->resource);
      const bool is_current = cur != current_.end() && cur->second == c;
      // 1.25: every client's lists reach the resource; 1.20 stopped the
      // previous endpoint.
      if (is_current || profile_ == Profile::k1_25) views_[c->resource].devices = u.devices;
      c->updates.push_back(std::move(u));
    }
    cv_.notify_all();
  }
  reader->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    c->done = true;
    auto cur = current_.find(c->resource);
    if (cur != current_.end() && (profile_ == Profile::k1_25 || cur->second == c)) {
      // 1.25: runClient disconnects whichever client is current now.
      cur->second->stream_ctx.TryCancel();
      current_.erase(cur);
      MarkUnhealthyLocked(c->resource);
    }
  }
  cv_.notify_all();
}

void KubeletSimulator::DisconnectCurrent(const std::string& resource) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto cur = current_.find(resource);
    if (cur == current_.end()) return;
    cur->second->stream_ctx.TryCancel();
    current_.erase(cur);
    MarkUnhealthyLocked(resource);
  }
  cv_.notify_all();
}

int KubeletSimulator::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(requests_.size());
}

std::vector<v1beta1::RegisterRequest> KubeletSimulator::registration_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

bool KubeletSimulator::WaitForRegistrations(int count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return static_cast<int>(requests_.size()) >= count; });
}

std::vector<v1beta1::Device> KubeletSimulator::Devices(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = views_.find(resource);
  return it == views_.end() ? std::vector<v1beta1::Device>{} : it->second.devices;
}

namespace {
int HealthyIn(const std::vector<v1beta1::Device>& devices) {
  int n = 0;
  for (const auto& d : devices) n += d.health() == "Healthy";
  return n;
}
}  // namespace

int KubeletSimulator::Allocatable(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = views_.find(resource);
  if (it == views_.end() || !it->second.connected) return 0;
  return HealthyIn(it->second.devices);
}

int KubeletSimulator::CapacityLocked(const std::string& resource) const {
  auto it = views_.find(resource);
  if (it == views_.end()) return 0;
  const View& v = it->second;
  if (!v.connected && std::chrono::steady_clock::now() - v.stopped_at > stop_grace_) return 0;
  return static_cast<int>(v.devices.size());
}

int KubeletSimulator::Capacity(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CapacityLocked(resource);
}

bool KubeletSimulator::WaitForCapacity(const std::string& resource, int count,
                                       std::chrono::milliseconds timeout) {
  // Capacity changes with the clock as well as with the plugins: poll.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  while (CapacityLocked(resource) != count) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
  return true;
}

void KubeletSimulator::SetEndpointStopGracePeriod(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mu_);
  stop_grace_ = grace;
}

int KubeletSimulator::Disconnects(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = views_.find(resource);
  return it == views_.end() ? 0 : it->second.disconnects;
}

std::vector<KubeletSimulator::Update> KubeletSimulator::Updates(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = current_.find(resource);
  if (it == current_.end()) return {};
  return it->second->updates;
}

bool KubeletSimulator::WaitForDevices(
    const std::string& resource,
    const std::function<bool(const std::vector<v1beta1::Device>&)>& pred,
    std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    auto it = views_.find(resource);
    return it != views_.end() && !it->second.devices.empty() && pred(it->second.devices);
  });
}

bool KubeletSimulator::WaitForAllocatable(const std::string& resource, int count,
                                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    auto it = views_.find(resource);
    return it != views_.end() && it->second.connected && HealthyIn(it->second.devices) == count;
  });
}

bool KubeletSimulator::WaitForOldClientsDone(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    for (const auto& c : clients_) {
      auto cur = current_.find(c->resource);
      const bool is_current = cur != current_.end() && cur->second == c;
      if (!is_current && !c->done) return false;
    }
    return true;
  });
}

bool KubeletSimulator::WaitForUpdateCount(const std::string& resource, size_t count,
                                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    auto it = current_.find(resource);
    return it != current_.end() && it->second->updates.size() >= count;
  });
}

v1beta1::DevicePluginOptions KubeletSimulator::Options(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = current_.find(resource);
  return it == current_.end() ? v1beta1::DevicePluginOptions() : it->second->options;
}

std::string KubeletSimulator::Admit(const std::string& resource,
                                    const std::vector<std::string>& ids) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto v = views_.find(resource);
  if (current_.count(resource) == 0 || v == views_.end() || !v->second.connected) {
    return "UnexpectedAdmissionError: can't allocate unregistered device " + resource;
  }
  std::set<std::string> healthy;
  for (const auto& d : v->second.devices) {
    if (d.health() == "Healthy") healthy.insert(d.id());
  }
  if (healthy.empty()) {
    return "UnexpectedAdmissionError: requested number of devices unavailable for " + resource +
           ". Requested: " + std::to_string(ids.size()) + ", Available: 0";
  }
  std::string unhealthy;
  for (const std::string& id : ids) {
    if (healthy.count(id) == 0) unhealthy += (unhealthy.empty() ? "" : ",") + id;
  }
  if (!unhealthy.empty()) {
    return "UnexpectedAdmissionError: previously allocated devices are no longer healthy; "
           "cannot allocate unhealthy devices " +
           resource + " [" + unhealthy + "]";
  }
  return "";
}

KubeletSimulator::ContainerConfig KubeletSimulator::MergeForContainer(
    const std::vector<v1beta1::ContainerAllocateResponse>& responses) {
  ContainerConfig out;
  std::set<std::string> mount_paths, device_paths, cdi;
  auto merge_map = [&out](const auto& from, std::map<std::string, std::string>* into,
                          const char* what) {
    for (const auto& [k, v] : from) {
      auto [it, added] = into->emplace(k, v);
      if (!added && it->second != v) {
        out.conflicts.push_back(std::string(what) + " " + k + ": kept \"" + it->second +
                                "\", skipped \"" + v + "\"");
      }
    }
  };
  for (const auto& r : responses) {
    merge_map(r.envs(), &out.envs, "env");
    merge_map(r.annotations(), &out.annotations, "annotation");
    for (const auto& m : r.mounts()) {
      if (mount_paths.insert(m.container_path()).second) out.mounts.push_back(m);
    }
    for (const auto& d : r.devices()) {
      if (device_paths.insert(d.container_path()).second) out.devices.push_back(d);
    }
    for (const auto& d : r.cdi_devices()) {
      if (cdi.insert(d.name()).second) out.cdi_devices.push_back(d.name());
    }
  }
  return out;
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> KubeletSimulator::Stub(const std::string& resource) {
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = current_.find(resource);
    if (it == current_.end()) return nullptr;
    channel = it->second->channel;
  }
  return v1beta1::DevicePlugin::NewStub(channel);
}

grpc::Status KubeletSimulator::Allocate(const std::string& resource,
                                        const v1beta1::AllocateRequest& req,
                                        v1beta1::AllocateResponse* resp) {
  auto stub = Stub(resource);
  if (!stub) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin for " + resource);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return stub->Allocate(&ctx, req, resp);
}

bool KubeletSimulator::ServePodResources(const std::string& socket) {
  pod_resources_ = std::make_unique<PodResourcesStandIn>(socket);
  return pod_resources_->Start();
}

grpc::Status KubeletSimulator::AdmitPod(const std::string& ns, const std::string& pod,
                                        const std::string& container, const std::string& resource,
                                        const std::vector<std::string>& ids,
                                        v1beta1::AllocateResponse* resp) {
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (const std::string& id : ids) c->add_devices_ids(id);
  grpc::Status s = Allocate(resource, req, resp);
  if (s.ok() && pod_resources_) {
    pod_resources_->Hold(ns, pod, container, resource, ids);
    std::vector<std::string> all;
    for (const v1beta1::Device& d : Devices(resource)) all.push_back(d.id());
    pod_resources_->SetAllocatable(resource, all);
  }
  return s;
}

void KubeletSimulator::EndPod(const std::string& ns, const std::string& pod) {
  if (pod_resources_) pod_resources_->EndPod(ns, pod);
}

grpc::Status KubeletSimulator::GetPreferredAllocation(
    const std::string& resource, const v1beta1::PreferredAllocationRequest& req,
    v1beta1::PreferredAllocationResponse* resp) {
  auto stub = Stub(resource);
  if (!stub) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin for " + resource);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return stub->GetPreferredAllocation(&ctx, req, resp);
}

grpc::Status KubeletSimulator::GetDevicePluginOptions(const std::string& resource,
                                                      v1beta1::DevicePluginOptions* resp) {
  auto stub = Stub(resource);
  if (!stub) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin for " + resource);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1beta1::Empty empty;
  return stub->GetDevicePluginOptions(&ctx, empty, resp);
}

grpc::Status KubeletSimulator::PreStartContainer(const std::string& resource,
                                                 const v1beta1::PreStartContainerRequest& req) {
  auto stub = Stub(resource);
  if (!stub) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin for " + resource);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1beta1::PreStartContainerResponse resp;
  return stub->PreStartContainer(&ctx, req, &resp);
}

}  // namespace gpu_agent::testing
