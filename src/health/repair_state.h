// What NVML shows of a repair a GPU still needs (the driver's recovery
// action, pending row remaps and page retirements), and whether a GPU held
// for a reset shows it was reset. Used by the health watcher.
#ifndef GPU_AGENT_HEALTH_REPAIR_STATE_H_
#define GPU_AGENT_HEALTH_REPAIR_STATE_H_

#include <optional>
#include <string>
#include <vector>

#include "nvml/nvml_api.h"

namespace gpu_agent::nvml {

class GpuHandles;
class NvmlLibrary;

}  // namespace gpu_agent::nvml

namespace gpu_agent::health {

// Each only where NVML answered.
struct RepairState {
  std::optional<unsigned> recovery_action;  // field 230, R550+
  std::optional<bool> remap_pending, remap_failed, pages_pending;
};

RepairState ReadRepairState(const nvml::NvmlLibrary& lib, nvmlDevice_t dev);

// A repair the driver still asks for, as at an agent's start after an XID
// it did not see, for each GPU of `uuids` NVML answers for: what it is, and
// the XID to file it under (48 for a memory repair, so that its status
// shows the reset; -1 for the driver's recovery action, so that only the
// action, or an operator, clears it).
struct PendingRepair {
  std::string uuid;
  std::string what;
  int xid = -1;
};
std::vector<PendingRepair> PendingRepairs(const nvml::NvmlLibrary& lib, nvml::GpuHandles& handles,
                                          const std::vector<std::string>& uuids);

// Whether the GPU answers a basic query on its handle. NVML_SUCCESS when it
// does; GPU_IS_LOST when it is off the bus. In MIG mode the GPU's memory
// needs privilege, so a refusal is asked again with a query open to all.
nvmlReturn_t Answer(const nvml::NvmlLibrary& lib, nvmlDevice_t dev);

// Memory errors, whose repair NVML shows as no remap or retirement pending
// (NVIDIA's GPU memory error management guide).
bool IsMemoryXid(int xid);

// Whether NVML shows that the GPU `dev`, which answers, was reset or
// repaired since it went out for `xid` (-1: none): nothing the driver still
// asks for (its recovery action, R550+), no row remap or page retirement
// pending or failed, and at least one such sign read (or `was_lost`: it fell
// off the bus and is back). Otherwise false, with what is missing.
bool ShowsReset(const nvml::NvmlLibrary& lib, nvmlDevice_t dev, int xid, bool was_lost,
                std::string* missing);

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_REPAIR_STATE_H_
