#include "pod_resources_stand_in.h"

#include <grpcpp/generic/async_generic_service.h>
#include <unistd.h>

#include "podresources/api.grpc.pb.h"

namespace gpu_agent::testing {

class PodResourcesStandIn::Service final : public v1::PodResourcesLister::CallbackService {
 public:
  explicit Service(PodResourcesStandIn* s) : s_(s) {}

  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* ctx,
                                 const v1::ListPodResourcesRequest*,
                                 v1::ListPodResourcesResponse* response) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    std::lock_guard<std::mutex> lock(s_->mu_);
    ++s_->list_calls_;
    switch (s_->answer_) {
      case Answer::kError:
        r->Finish(s_->fail_with_);
        break;
      case Answer::kHold:
        s_->held_.push_back({r, response});
        break;
      default:
        s_->FillLocked(response);
        r->Finish(grpc::Status::OK);
    }
    return r;
  }

  grpc::ServerUnaryReactor* GetAllocatableResources(
      grpc::CallbackServerContext* ctx, const v1::AllocatableResourcesRequest*,
      v1::AllocatableResourcesResponse* response) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    std::lock_guard<std::mutex> lock(s_->mu_);
    for (const auto& [resource, ids] : s_->allocatable_) {
      v1::ContainerDevices* d = response->add_devices();
      d->set_resource_name(resource);
      for (const std::string& id : ids) d->add_device_ids(id);
    }
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  PodResourcesStandIn* const s_;
};

// Answers every call, whatever its method, with bytes no protobuf message
// parses from (a field tag of number 0).
class PodResourcesStandIn::GarbageService final : public grpc::CallbackGenericService {
 public:
  explicit GarbageService(PodResourcesStandIn* s) : s_(s) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    {
      std::lock_guard<std::mutex> lock(s_->mu_);
      ++s_->list_calls_;
    }
    return new Reactor();
  }

 private:
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor() { StartRead(&request_); }
    void OnReadDone(bool) override {
      static const char kBytes[] = "\x00\x00\xff\xff";
      grpc::Slice slice(kBytes, sizeof(kBytes) - 1);
      answer_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer request_;
    grpc::ByteBuffer answer_;
  };

  PodResourcesStandIn* const s_;
};

PodResourcesStandIn::PodResourcesStandIn(std::string socket)
    : socket_(std::move(socket)),
      service_(std::make_unique<Service>(this)),
      garbage_(std::make_unique<GarbageService>(this)) {}

PodResourcesStandIn::~PodResourcesStandIn() { Stop(); }

bool PodResourcesStandIn::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  return StartLocked();
}

bool PodResourcesStandIn::StartLocked() {
  ::unlink(socket_.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
  if (answer_ == Answer::kGarbage) {
    builder.RegisterCallbackGenericService(garbage_.get());
  } else {
    builder.RegisterService(service_.get());
  }
  server_ = builder.BuildAndStart();
  return server_ != nullptr;
}

void PodResourcesStandIn::Stop() {
  std::unique_ptr<grpc::Server> server;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Held& h : held_)
      h.reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stopped"));
    held_.clear();
    server = std::move(server_);
  }
  if (server) server->Shutdown();
  ::unlink(socket_.c_str());
}

void PodResourcesStandIn::Hold(const std::string& ns, const std::string& pod,
                               const std::string& container, const std::string& resource,
                               const std::vector<std::string>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string>& held = pods_[{ns, pod}][container].devices[resource];
  held.insert(held.end(), ids.begin(), ids.end());
}

void PodResourcesStandIn::HoldClaimDevice(const std::string& ns, const std::string& pod,
                                          const std::string& container, const std::string& claim_ns,
                                          const std::string& claim, const std::string& driver,
                                          const std::string& pool, const std::string& device,
                                          const std::string& share_id) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_[{ns, pod}][container].claim_devices.push_back(
      {claim_ns, claim, driver, pool, device, share_id});
}

void PodResourcesStandIn::EndPod(const std::string& ns, const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_.erase({ns, pod});
}

void PodResourcesStandIn::SetAllocatable(const std::string& resource,
                                         const std::vector<std::string>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  allocatable_[resource] = ids;
}

void PodResourcesStandIn::SetAnswer(Answer answer) {
  std::unique_ptr<grpc::Server> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool restart = server_ && ((answer == Answer::kGarbage) != (answer_ == Answer::kGarbage));
    answer_ = answer;
    if (!restart) return;
    // Held calls answer first: a server does not shut down under them.
    for (const Held& h : held_) {
      h.reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "answer changed"));
    }
    held_.clear();
    old = std::move(server_);
  }
  // Another service answers on the same socket: a server of its own.
  old->Shutdown();
  std::lock_guard<std::mutex> lock(mu_);
  StartLocked();
}

void PodResourcesStandIn::FailWith(grpc::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fail_with_ = std::move(status);
  }
  SetAnswer(Answer::kError);
}

void PodResourcesStandIn::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  answer_ = Answer::kTable;
  for (const Held& h : held_) {
    FillLocked(h.response);
    h.reactor->Finish(grpc::Status::OK);
  }
  held_.clear();
}

int PodResourcesStandIn::list_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return list_calls_;
}

int PodResourcesStandIn::held_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(held_.size());
}

void PodResourcesStandIn::FillLocked(void* out) const {
  auto* response = static_cast<v1::ListPodResourcesResponse*>(out);
  for (const auto& [key, containers] : pods_) {
    v1::PodResources* p = response->add_pod_resources();
    p->set_namespace_(key.first);
    p->set_name(key.second);
    for (const auto& [name, c] : containers) {
      v1::ContainerResources* cr = p->add_containers();
      cr->set_name(name);
      for (const auto& [resource, ids] : c.devices) {
        v1::ContainerDevices* d = cr->add_devices();
        d->set_resource_name(resource);
        for (const std::string& id : ids) d->add_device_ids(id);
      }
      for (const ClaimDevice& cd : c.claim_devices) {
        v1::DynamicResource* dr = cr->add_dynamic_resources();
        dr->set_claim_namespace(cd.claim_ns);
        dr->set_claim_name(cd.claim);
        v1::ClaimResource* res = dr->add_claim_resources();
        res->set_driver_name(cd.driver);
        res->set_pool_name(cd.pool);
        res->set_device_name(cd.device);
        if (!cd.share_id.empty()) res->set_share_id(cd.share_id);
      }
    }
  }
}

}  // namespace gpu_agent::testing
