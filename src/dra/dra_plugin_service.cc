#include "dra/dra_plugin_service.h"

#include <map>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::dra {
namespace {

namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

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
uint64_t Prepare(ClaimHandler& handler, const std::vector<ClaimRef>& claims, Response* response) {
  const std::map<std::string, PrepareOutcome> outcomes = handler.Prepare(claims);
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
      if (!d.share_id.empty()) pd->set_share_id(d.share_id);
    }
  }
  return errors;
}

template <class Response>
uint64_t Unprepare(ClaimHandler& handler, const std::vector<ClaimRef>& claims, Response* response) {
  const std::map<std::string, std::string> errors = handler.Unprepare(claims);
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

grpc::Status ShuttingDown() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the DRA plugin is shutting down");
}

}  // namespace

ClaimsThread::ClaimsThread() {
  thread_ = std::thread([this] {
    NameThisThread("dra-claims");
    Run();
  });
}

void ClaimsThread::Post(std::function<void()> run, std::function<void()> refuse) {
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

void ClaimsThread::Refuse() {
  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    left.swap(jobs_);
  }
  for (Job& j : left) j.refuse();
}

void ClaimsThread::Join() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Refuse();
}

void ClaimsThread::Run() {
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

template <bool kPrepare, class Service, class Request, class Response, class AskFn>
void DraPluginService::AskClaims(grpcserver::CqServer& server, Service* async, AskFn ask) {
  using Call = grpcserver::UnaryCall<Service, Request, Response>;
  Call::Next(&server, async, ask, [this](Call& call) {
    claims_.Post(
        [this, &call] {
          const std::vector<ClaimRef> claims = ClaimsOf(call.request());
          uint64_t errors;
          if constexpr (kPrepare) {
            errors = Prepare(*handler_, claims, call.response());
          } else {
            errors = Unprepare(*handler_, claims, call.response());
          }
          {
            std::lock_guard<std::mutex> lock(mu_);
            ++(kPrepare ? counts_.prepare_calls : counts_.unprepare_calls);
            counts_.claim_errors += errors;
          }
          call.Finish(grpc::Status::OK);
        },
        [&call] { call.Finish(ShuttingDown()); });
  });
}

void DraPluginService::Ask(grpcserver::CqServer& server, DraServices& services) {
  using V1 = v1::DRAPlugin::AsyncService;
  using V1beta1 = v1beta1::DRAPlugin::AsyncService;
  AskClaims<true, V1, v1::NodePrepareResourcesRequest, v1::NodePrepareResourcesResponse>(
      server, &services.v1, &V1::RequestNodePrepareResources);
  AskClaims<false, V1, v1::NodeUnprepareResourcesRequest, v1::NodeUnprepareResourcesResponse>(
      server, &services.v1, &V1::RequestNodeUnprepareResources);
  AskClaims<true, V1beta1, v1beta1::NodePrepareResourcesRequest,
            v1beta1::NodePrepareResourcesResponse>(server, &services.v1beta1,
                                                   &V1beta1::RequestNodePrepareResources);
  AskClaims<false, V1beta1, v1beta1::NodeUnprepareResourcesRequest,
            v1beta1::NodeUnprepareResourcesResponse>(server, &services.v1beta1,
                                                     &V1beta1::RequestNodeUnprepareResources);
}

void DraPluginService::Retire(std::shared_ptr<void> old) {
  // Posted after the batches the old server handed over: run (or refused)
  // after them, and the last copy of `old` goes with the job.
  claims_.Post([old] {}, [old] {});
}

ClaimCallCounts DraPluginService::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace gpu_agent::dra
