#include "health/event_registry.h"

#include <utility>

#include "base/log.h"
#include "base/strings.h"
#include "nvml/gpu_handles.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::health {

bool EventRegistry::Create() {
  const nvml::NvmlFunctions& f = lib_.fn();
  if (!f.EventSetCreate || !f.EventSetWait || !f.DeviceRegisterEvents ||
      !f.DeviceGetSupportedEventTypes || !f.EventSetFree) {
    LogWarning("this NVML has no event API; XID health checks are off");
    return false;
  }
  const nvmlReturn_t r = f.EventSetCreate(&set_);
  if (r != NVML_SUCCESS) {
    LogError("nvmlEventSetCreate failed; XID health checks are off",
             {{"error", lib_.ErrorText(r)}});
    set_ = nullptr;
    return false;
  }
  return true;
}

nvmlReturn_t EventRegistry::RegisterIn(nvmlEventSet_t set, const std::string& uuid,
                                       std::map<nvmlDevice_t, std::string>* into,
                                       std::string* error) {
  const nvml::NvmlFunctions& f = lib_.fn();
  nvmlReturn_t r = NVML_SUCCESS;
  nvmlDevice_t dev = handles_->Find(uuid, &r);
  if (dev == nullptr) {
    *error = lib_.ErrorText(r);
    LogWarning("cannot watch GPU health", {{"uuid", uuid}, {"error", *error}});
    return r;
  }
  unsigned long long supported = 0;
  if (f.DeviceGetSupportedEventTypes(dev, &supported) != NVML_SUCCESS) supported = 0;
  const unsigned long long wanted = nvmlEventTypeXidCriticalError & supported;
  if (wanted == 0) {
    LogWarning("GPU does not report XID events; its health is not watched", {{"uuid", uuid}});
    return NVML_SUCCESS;
  }
  r = f.DeviceRegisterEvents(dev, wanted, set);
  if (r != NVML_SUCCESS) {
    LogWarning("cannot register for XID events", {{"uuid", uuid}, {"error", lib_.ErrorText(r)}});
    return NVML_SUCCESS;
  }
  (*into)[dev] = uuid;
  return NVML_SUCCESS;
}

absl::Status EventRegistry::Register(const std::string& uuid) {
  std::string error;
  if (RegisterIn(set_, uuid, &uuid_by_handle_, &error) != NVML_SUCCESS) {
    return absl::NotFoundError(StrCat("NVML cannot find it: ", error));
  }
  return absl::OkStatus();
}

bool EventRegistry::Watches(const std::string& uuid) const {
  for (const auto& [dev, u] : uuid_by_handle_) {
    if (u == uuid) return true;
  }
  return false;
}

std::map<std::string, std::string> EventRegistry::Rebuild(
    const std::string& returning, const std::function<void(const nvmlEventData_t&)>& pending) {
  const nvml::NvmlFunctions& f = lib_.fn();
  std::map<std::string, std::string> failed;
  nvmlEventSet_t fresh = nullptr;
  const nvmlReturn_t r = f.EventSetCreate(&fresh);
  if (r != NVML_SUCCESS) {
    LogWarning("cannot build a new NVML event set; registering the returning GPU in the old one",
               {{"uuid", returning}, {"error", lib_.ErrorText(r)}});
    if (absl::Status s = Register(returning); !s.ok()) failed[returning] = std::string(s.message());
    return failed;
  }
  std::set<std::string> uuids = {returning};
  for (const auto& [dev, uuid] : uuid_by_handle_) uuids.insert(uuid);
  std::map<nvmlDevice_t, std::string> registered;
  for (const std::string& uuid : uuids) {
    std::string error;
    if (RegisterIn(fresh, uuid, &registered, &error) != NVML_SUCCESS) {
      failed[uuid] = StrCat("NVML cannot find it: ", error);
    }
  }
  // Events that came before the new registrations wait in the old set only.
  for (int i = 0; i < 1000; ++i) {
    nvmlEventData_t ev{};
    if (Wait(&ev, std::chrono::milliseconds(0)) != NVML_SUCCESS) break;
    pending(ev);
  }
  f.EventSetFree(set_);
  set_ = fresh;
  uuid_by_handle_ = std::move(registered);
  LogInfo("NVML event set rebuilt for a GPU that returned", {{"uuid", returning}});
  return failed;
}

nvmlReturn_t EventRegistry::Wait(nvmlEventData_t* ev, std::chrono::milliseconds timeout) {
  // "Not MIG-scoped" unless the driver says otherwise: a driver that
  // leaves them must not file a GPU-wide XID under instance 0/0.
  ev->gpuInstanceId = ev->computeInstanceId = NVML_MIG_INSTANCE_ID_NONE;
  return lib_.fn().EventSetWait(set_, ev, static_cast<unsigned>(timeout.count()));
}

std::string EventRegistry::UuidOf(nvmlDevice_t dev) const {
  auto it = uuid_by_handle_.find(dev);
  return it == uuid_by_handle_.end() ? "" : it->second;
}

void EventRegistry::Free() {
  if (set_ != nullptr) lib_.fn().EventSetFree(set_);
  set_ = nullptr;
  uuid_by_handle_.clear();
}

}  // namespace gpu_agent::health
