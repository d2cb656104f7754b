// The DRA checkpoint's record: every prepared claim by UID, with what the
// kubelet was answered for it and what unprepare must undo, as JSON
// (kept on disk by base/slotted_file).
#ifndef GPU_AGENT_DRA_CLAIM_CHECKPOINT_H_
#define GPU_AGENT_DRA_CLAIM_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dra/claim_handler.h"

namespace gpu_agent::dra {

struct PreparedClaim {
  struct Device {
    PreparedDevice answer;  // what the kubelet was told
    // The GPU's or MIG device's UUID it was prepared as; empty where a
    // version 1 checkpoint or a spec on disk was all there was to go on.
    std::string uuid;
    bool admin_access = false;  // shared with other claims by design
    // The shares of a shared device it holds (answer.share_id set); 0 for
    // a device given whole.
    int64_t shares = 0;
  };
  std::string name_space, name;
  std::vector<Device> devices;
  // Taken from a spec on disk, which does not hold the request names:
  // the next prepare reads the claim again rather than answer from it.
  bool from_spec = false;
  // GPUs (UUIDs) whose time slice its GpuConfig set to other than
  // Default: set back when it is unprepared.
  std::vector<std::string> time_sliced;
};

// By claim UID.
using PreparedClaims = std::map<std::string, PreparedClaim>;

// Version 2: each device with its UUID and admin access, and a share of a
// shared device with its shareID and shares (fields an agent that knows no
// sharing passes over, taking the device as held whole: it prepares no
// other claim on it).
std::string RenderCheckpoint(const PreparedClaims& claims);

// The claims of a record RenderCheckpoint wrote (version 2), or an older
// version wrote (version 1: no UUIDs, no admin access). Errors say what is
// wrong with it (not JSON, no version it knows, a UID that cannot be one, a
// claim with no devices list).
absl::StatusOr<PreparedClaims> ParseCheckpoint(std::string_view record);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_CLAIM_CHECKPOINT_H_
