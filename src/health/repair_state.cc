#include "health/repair_state.h"

#include "base/strings.h"
#include "nvml/gpu_handles.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::health {

bool IsMemoryXid(int xid) {
  return xid == 48 || xid == 63 || xid == 64 || xid == 92 || xid == 94 || xid == 95;
}

RepairState ReadRepairState(const nvml::NvmlLibrary& lib, nvmlDevice_t dev) {
  const nvml::NvmlFunctions& f = lib.fn();
  RepairState st;
  if (f.DeviceGetFieldValues) {
    nvmlFieldValue_t v{};
    v.fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
    if (f.DeviceGetFieldValues(dev, 1, &v) == NVML_SUCCESS && v.nvmlReturn == NVML_SUCCESS) {
      st.recovery_action = v.value.uiVal;
    }
  }
  unsigned corr = 0, unc = 0, pending = 0, failed = 0;
  if (f.DeviceGetRemappedRows &&
      f.DeviceGetRemappedRows(dev, &corr, &unc, &pending, &failed) == NVML_SUCCESS) {
    st.remap_pending = pending != 0;
    st.remap_failed = failed != 0;
  }
  nvmlEnableState_t retire = NVML_FEATURE_DISABLED;
  if (f.DeviceGetRetiredPagesPendingStatus &&
      f.DeviceGetRetiredPagesPendingStatus(dev, &retire) == NVML_SUCCESS) {
    st.pages_pending = retire == NVML_FEATURE_ENABLED;
  }
  return st;
}

namespace {

bool RepairPending(const RepairState& st, std::string* what, int* xid) {
  *xid = 48;
  if (st.recovery_action && *st.recovery_action != NVML_GPU_RECOVERY_ACTION_NONE) {
    *what = StrCat("the driver asks for recovery action ", *st.recovery_action);
    *xid = -1;
  } else if (st.remap_failed.value_or(false)) {
    *what = "row remapping failed";
  } else if (st.remap_pending.value_or(false)) {
    *what = "a row remap is pending";
  } else if (st.pages_pending.value_or(false)) {
    *what = "page retirement is pending";
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::vector<PendingRepair> PendingRepairs(const nvml::NvmlLibrary& lib, nvml::GpuHandles& handles,
                                          const std::vector<std::string>& uuids) {
  std::vector<PendingRepair> out;
  for (const std::string& uuid : uuids) {
    nvmlReturn_t why = NVML_SUCCESS;
    nvmlDevice_t dev = handles.Find(uuid, &why);
    if (dev == nullptr) continue;
    PendingRepair p{uuid, "", -1};
    if (RepairPending(ReadRepairState(lib, dev), &p.what, &p.xid)) out.push_back(std::move(p));
  }
  return out;
}

nvmlReturn_t Answer(const nvml::NvmlLibrary& lib, nvmlDevice_t dev) {
  const nvml::NvmlFunctions& f = lib.fn();
  nvmlMemory_t mem{};
  nvmlReturn_t r = f.DeviceGetMemoryInfo(dev, &mem);
  unsigned current = 0, pending = 0;
  if (r == NVML_ERROR_NO_PERMISSION && f.DeviceGetMigMode) {
    r = f.DeviceGetMigMode(dev, &current, &pending);
  }
  return r;
}

bool ShowsReset(const nvml::NvmlLibrary& lib, nvmlDevice_t dev, int xid, bool was_lost,
                std::string* missing) {
  // A healthy GPU has no remap or retirement pending either: that status
  // shows a repair only after a memory error. After any other XID only
  // the driver's recovery action, or the GPU coming back on the bus, does.
  const bool memory = IsMemoryXid(xid);
  int signs = was_lost ? 1 : 0;
  const RepairState st = ReadRepairState(lib, dev);
  if (st.recovery_action) {
    if (*st.recovery_action != NVML_GPU_RECOVERY_ACTION_NONE) {
      *missing = StrCat("the driver still asks for recovery action ", *st.recovery_action,
                        " (1: GPU reset, 2: node reboot, 3: drain P2P, 4: drain and reset)");
      return false;
    }
    ++signs;
  }
  if (st.remap_failed.value_or(false)) {
    *missing = "row remapping failed: the GPU needs service";
    return false;
  }
  if (st.remap_pending.value_or(false)) {
    *missing = "a row remap is pending until the GPU is reset";
    return false;
  }
  if (st.pages_pending.value_or(false)) {
    *missing = "page retirement is pending until the GPU is reset";
    return false;
  }
  if (memory) signs += (st.remap_pending ? 1 : 0) + (st.pages_pending ? 1 : 0);
  if (signs == 0) {
    *missing = memory ? "this NVML shows no sign of a reset"
                      : "this NVML has no recovery action (R550+) to show a reset";
    return false;
  }
  return true;
}

}  // namespace gpu_agent::health
