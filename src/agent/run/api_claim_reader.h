// How DRA mode reads the ResourceClaims the kubelet asks it to prepare:
// through the resource.k8s.io version the API server serves (v1, else
// v1beta2, else v1beta1: their claims' allocation results have one shape),
// asked once, on the first claim; one connection per concurrent read
// (dra::kConcurrentReads), each GET on a free one.
#ifndef GPU_AGENT_AGENT_RUN_API_CLAIM_READER_H_
#define GPU_AGENT_AGENT_RUN_API_CLAIM_READER_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "apiserver/rest_client.h"
#include "dra/claim_preparer.h"

namespace gpu_agent {

class ApiClaimReader : public dra::ClaimReader {
 public:
  // REQUIRES: at least two `clients`: the first for discovery, the others
  // for the claims' GETs.
  explicit ApiClaimReader(std::vector<std::unique_ptr<apiserver::RestClient>> clients);

  absl::StatusOr<Answer> GetClaim(const std::string& ns, const std::string& name) override;

  // On a stop: the GET in progress is cut off (the claim is answered with
  // that error, which the kubelet retries with the next agent) and no other
  // starts, so the stop does not wait out an API server that hangs.
  void Cancel();

 private:
  absl::StatusOr<std::string> Version();

  const std::vector<std::unique_ptr<apiserver::RestClient>> clients_;
  apiserver::RestClient* const discovery_;  // one of clients_, never lent to a GET
  std::atomic<bool> stopping_{false};
  std::mutex flight_mu_;  // with flight_cv_: a free client, and Cancel's wait
  std::condition_variable flight_cv_;
  std::vector<apiserver::RestClient*> free_;  // protected by flight_mu_
  int in_flight_ = 0;                         // protected by flight_mu_
  std::mutex mu_;
  std::string version_;  // protected by mu_: empty until discovered
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_API_CLAIM_READER_H_
