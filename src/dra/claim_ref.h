// The names the kubelet gives a claim, checked before they reach a URL or a
// file name, and the claim as errors and logs name it.
#ifndef GPU_AGENT_DRA_CLAIM_REF_H_
#define GPU_AGENT_DRA_CLAIM_REF_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "dra/claim_handler.h"

namespace gpu_agent::dra {

// The longest claim UID taken (Kubernetes UIDs are 36-character UUIDs).
inline constexpr size_t kMaxClaimUid = 128;

// A claim UID the agent may name a file after: 1 to kMaxClaimUid letters,
// digits and '-'. The error says what is wrong.
absl::Status ValidateClaimUid(std::string_view uid);
// A claim the kubelet named as Kubernetes allows one: namespace a DNS
// label, name a DNS subdomain, UID as above. The error names the claim.
absl::Status ValidateClaimRef(const ClaimRef& claim);

// "claim <namespace>/<name>", printable whatever the kubelet sent (names
// reach logs and errors before they are checked).
std::string NamedClaim(const ClaimRef& claim);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_CLAIM_REF_H_
