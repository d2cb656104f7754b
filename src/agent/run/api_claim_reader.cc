#include "agent/run/api_claim_reader.h"

#include "apiserver/discovery.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {

ApiClaimReader::ApiClaimReader(std::vector<std::unique_ptr<apiserver::RestClient>> clients)
    : clients_(std::move(clients)), discovery_(clients_.front().get()) {
  for (size_t i = 1; i < clients_.size(); ++i) free_.push_back(clients_[i].get());
}

absl::StatusOr<dra::ClaimReader::Answer> ApiClaimReader::GetClaim(const std::string& ns,
                                                                  const std::string& name) {
  if (stopping_) return absl::UnavailableError("the agent is stopping");
  absl::StatusOr<std::string> version = Version();
  if (!version.ok()) return version.status();
  apiserver::RestClient* client = nullptr;
  {
    std::unique_lock<std::mutex> lock(flight_mu_);
    flight_cv_.wait(lock, [this] { return stopping_ || !free_.empty(); });
    if (stopping_) return absl::UnavailableError("the agent is stopping");
    client = free_.back();
    free_.pop_back();
    ++in_flight_;
  }
  // The kubelet's names, each one path segment whatever it sent.
  absl::StatusOr<apiserver::HttpResponse> r = client->Get(
      StrCat("/apis/resource.k8s.io/", *version, "/namespaces/", apiserver::EscapePathSegment(ns),
             "/resourceclaims/", apiserver::EscapePathSegment(name)));
  {
    std::lock_guard<std::mutex> lock(flight_mu_);
    --in_flight_;
    free_.push_back(client);
  }
  flight_cv_.notify_all();
  if (!r.ok()) return r.status();
  return Answer{r->status, std::move(r->body)};
}

void ApiClaimReader::Cancel() {
  {
    std::lock_guard<std::mutex> lock(flight_mu_);
    stopping_ = true;
  }
  flight_cv_.notify_all();
  // Sticky (RestClient::Cancel): a GET in progress, or one just starting,
  // ends at once, and none starts after.
  for (const auto& c : clients_) c->Cancel();
  std::unique_lock<std::mutex> lock(flight_mu_);
  flight_cv_.wait(lock, [this] { return in_flight_ == 0; });
}

absl::StatusOr<std::string> ApiClaimReader::Version() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!version_.empty()) return version_;
  {
    // Counted as a GET in flight, so a stop cuts it off too.
    std::lock_guard<std::mutex> flight(flight_mu_);
    if (stopping_) return absl::UnavailableError("the agent is stopping");
    ++in_flight_;
  }
  absl::StatusOr<std::string> v = apiserver::DiscoverResourceApiVersion(discovery_);
  {
    std::lock_guard<std::mutex> flight(flight_mu_);
    --in_flight_;
  }
  flight_cv_.notify_all();
  if (!v.ok()) return v.status();
  version_ = *v;
  LogInfo("reading ResourceClaims through resource.k8s.io/" + version_);
  return version_;
}

}  // namespace gpu_agent
