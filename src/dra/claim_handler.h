// What the DRA service asks of the rest of the agent: prepare and unprepare
// the devices of a batch of ResourceClaims. The service knows gRPC and the
// kubelet's messages; the handler knows claims, devices and CDI. Plain
// records only, the same for every version of the kubelet's API.
#ifndef GPU_AGENT_DRA_CLAIM_HANDLER_H_
#define GPU_AGENT_DRA_CLAIM_HANDLER_H_

#include <map>
#include <string>
#include <vector>

namespace gpu_agent::dra {

// A claim as the kubelet names it.
struct ClaimRef {
  std::string name_space;
  std::string uid;
  std::string name;
};

// One device prepared for a claim, as the kubelet is told of it.
struct PreparedDevice {
  std::vector<std::string> request_names;  // the claim's requests it serves
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_ids;  // "<vendor>/<class>=<name>"
  // The allocation's shareID for a device claims share (consumable
  // capacity); "" for one given whole.
  std::string share_id;
};

// One claim's answer: its devices, or its own error (then no devices).
struct PrepareOutcome {
  std::vector<PreparedDevice> devices;
  std::string error;
};

// Called from the DRA server's claims thread, one batch at a time.
class ClaimHandler {
 public:
  virtual ~ClaimHandler() = default;
  // An answer for every claim of `claims`, by UID.
  virtual std::map<std::string, PrepareOutcome> Prepare(const std::vector<ClaimRef>& claims) = 0;
  // An error per claim by UID, empty when unprepared (or never prepared).
  virtual std::map<std::string, std::string> Unprepare(const std::vector<ClaimRef>& claims) = 0;
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_CLAIM_HANDLER_H_
