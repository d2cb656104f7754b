#include "kubelet_simulator.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/resource_name.h"

namespace gpu_agent::testing {

class KubeletSimulator::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(KubeletSimulator* sim) : sim_(sim) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    {
      std::lock_guard<std::mutex> lock(sim_->mu_);
      if (!sim_->refuse_.empty()) return grpc::Status(grpc::StatusCode::UNKNOWN, sim_->refuse_);
    }
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
    sim_->OnRegistered(*req);
    return grpc::Status::OK;
  }

 private:
  KubeletSimulator* sim_;
};

KubeletSimulator::KubeletSimulator(std::string dir) : dir_(std::move(dir)) {}

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

void KubeletSimulator::DropPlugins() {
  std::map<std::string, std::shared_ptr<Plugin>> plugins;
  {
    std::lock_guard<std::mutex> lock(mu_);
    plugins.swap(plugins_);
  }
  for (auto& [name, p] : plugins) {
    if (p->stream_ctx) p->stream_ctx->TryCancel();
    if (p->reader.joinable()) p->reader.join();
  }
}

void KubeletSimulator::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  DropPlugins();
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

void KubeletSimulator::OnRegistered(const v1beta1::RegisterRequest& req) {
  auto plugin = std::make_shared<Plugin>();
  plugin->endpoint = req.endpoint();
  plugin->channel = grpc::CreateChannel("unix://" + dir_ + "/" + req.endpoint(),
                                        grpc::InsecureChannelCredentials());
  plugin->stream_ctx = std::make_unique<grpc::ClientContext>();
  std::shared_ptr<Plugin> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req);
    auto it = plugins_.find(req.resource_name());
    if (it != plugins_.end()) old = it->second;
    plugins_[req.resource_name()] = plugin;
  }
  if (old) {
    old->stream_ctx->TryCancel();
    if (old->reader.joinable()) old->reader.join();
  }
  // Like the kubelet: after Register returns, ask the options and open one
  // ListAndWatch stream, on a thread of its own.
  Plugin* p = plugin.get();
  const std::string resource = req.resource_name();
  p->reader = std::thread([this, p, resource] {
    auto stub = v1beta1::DevicePlugin::NewStub(p->channel);
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1beta1::Empty empty;
      v1beta1::DevicePluginOptions opts;
      if (stub->GetDevicePluginOptions(&ctx, empty, &opts).ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        p->options = opts;
      }
    }
    v1beta1::Empty empty;
    auto reader = stub->ListAndWatch(p->stream_ctx.get(), empty);
    v1beta1::ListAndWatchResponse msg;
    while (reader->Read(&msg)) {
      Update u;
      u.at = std::chrono::steady_clock::now();
      u.devices.assign(msg.devices().begin(), msg.devices().end());
      {
        std::lock_guard<std::mutex> lock(mu_);
        p->updates.push_back(std::move(u));
      }
      cv_.notify_all();
    }
    reader->Finish();
  });
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
  auto it = plugins_.find(resource);
  if (it == plugins_.end() || it->second->updates.empty()) return {};
  return it->second->updates.back().devices;
}

std::vector<KubeletSimulator::Update> KubeletSimulator::Updates(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plugins_.find(resource);
  if (it == plugins_.end()) return {};
  return it->second->updates;
}

bool KubeletSimulator::WaitForDevices(
    const std::string& resource,
    const std::function<bool(const std::vector<v1beta1::Device>&)>& pred,
    std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    auto it = plugins_.find(resource);
    return it != plugins_.end() && !it->second->updates.empty() &&
           pred(it->second->updates.back().devices);
  });
}

bool KubeletSimulator::WaitForUpdateCount(const std::string& resource, size_t count,
                                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    auto it = plugins_.find(resource);
    return it != plugins_.end() && it->second->updates.size() >= count;
  });
}

v1beta1::DevicePluginOptions KubeletSimulator::Options(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plugins_.find(resource);
  return it == plugins_.end() ? v1beta1::DevicePluginOptions() : it->second->options;
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> KubeletSimulator::Stub(const std::string& resource) {
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plugins_.find(resource);
    if (it == plugins_.end()) return nullptr;
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
