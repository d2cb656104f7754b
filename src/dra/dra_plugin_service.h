// The DRA plugin service (NodePrepareResources and NodeUnprepareResources,
// v1 and v1beta1, which differ only in names). Prepare and unprepare can
// wait on the API server for seconds, so they never run on the server's
// queue thread: one claims thread takes the batches in order of arrival and
// hands them to the ClaimHandler; every claim asked is answered.
#ifndef GPU_AGENT_DRA_DRA_PLUGIN_SERVICE_H_
#define GPU_AGENT_DRA_DRA_PLUGIN_SERVICE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "dra/claim_handler.h"
#include "dra/dra_v1.grpc.pb.h"
#include "dra/dra_v1beta1.grpc.pb.h"
#include "grpcserver/cq_server.h"
#include "grpcserver/unary_call.h"

namespace gpu_agent::dra {

// The one thread prepare and unprepare run on, in order of arrival.
class ClaimsThread {
 public:
  ClaimsThread();
  ~ClaimsThread() { Join(); }
  ClaimsThread(const ClaimsThread&) = delete;
  ClaimsThread& operator=(const ClaimsThread&) = delete;

  // `run` does the work; `refuse` answers instead once the server stops.
  void Post(std::function<void()> run, std::function<void()> refuse);
  // Jobs not started are refused from here on; the one running finishes.
  void Refuse();
  // Refuses what is left and ends the thread.
  void Join();

 private:
  struct Job {
    std::function<void()> run;
    std::function<void()> refuse;
  };
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;   // protected by mu_
  bool stopping_ = false;  // protected by mu_: new jobs are refused
  bool done_ = false;      // protected by mu_: the thread ends once idle
  std::thread thread_;
};

// The DRA services of both versions, for one server.
struct DraServices {
  k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::AsyncService v1;
  k8s::io::kubelet::pkg::apis::dra::v1beta1::DRAPlugin::AsyncService v1beta1;
};

struct ClaimCallCounts {
  uint64_t prepare_calls = 0;
  uint64_t unprepare_calls = 0;
  uint64_t claim_errors = 0;  // claims answered with an error, both calls
};

class DraPluginService {
 public:
  explicit DraPluginService(std::shared_ptr<ClaimHandler> handler) : handler_(std::move(handler)) {}

  // Asks `server` for the next call of each method of both versions.
  void Ask(grpcserver::CqServer& server, DraServices& services);

  // Batches not started are answered UNAVAILABLE (the kubelet retries);
  // the one running finishes. Then Join ends the claims thread.
  void Refuse() { claims_.Refuse(); }
  void Join() { claims_.Join(); }
  // Frees `old` (a server the socket was served by, with its services) on
  // the claims thread once the batches it handed over are answered.
  void Retire(std::shared_ptr<void> old);

  ClaimCallCounts counts() const;

 private:
  // Asks for one method's next call, which the claims thread answers.
  template <bool kPrepare, class Service, class Request, class Response, class AskFn>
  void AskClaims(grpcserver::CqServer& server, Service* async, AskFn ask);

  const std::shared_ptr<ClaimHandler> handler_;
  mutable std::mutex mu_;
  ClaimCallCounts counts_;  // protected by mu_
  ClaimsThread claims_;     // last: joined before what its jobs use goes
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_DRA_PLUGIN_SERVICE_H_
