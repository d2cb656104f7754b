// The NVML event set the health watcher waits on, and which GPU each
// registered handle is. NVML has no call to take one GPU out of a set, and
// a GPU reset (the only way back from off the bus) tears down the driver's
// state for that GPU, registrations included; so a GPU that returns is
// watched again by building a fresh set (NVML: "all events that occurred
// before [registration] are not recorded").
//
// Thread-compatible: the health watcher's thread alone uses it after
// Create().
#ifndef GPU_AGENT_HEALTH_EVENT_REGISTRY_H_
#define GPU_AGENT_HEALTH_EVENT_REGISTRY_H_

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "nvml/nvml_api.h"

namespace gpu_agent::nvml {

class GpuHandles;
class NvmlLibrary;

}  // namespace gpu_agent::nvml

namespace gpu_agent::health {

class EventRegistry {
 public:
  // REQUIRES: `lib` and `handles` outlive this object. GPUs are registered
  // by the handles `handles` keeps (never a fresh lookup by UUID).
  EventRegistry(const nvml::NvmlLibrary& lib, nvml::GpuHandles* handles)
      : lib_(lib), handles_(handles) {}
  ~EventRegistry() { Free(); }
  EventRegistry(const EventRegistry&) = delete;
  EventRegistry& operator=(const EventRegistry&) = delete;

  // Creates the event set. False (logged) when NVML has no event API or
  // refuses a set: XID health checks are then off.
  bool Create();

  // Registers `uuid`'s XID events. kNotFound when NVML has no handle for
  // it (the message says why); OK without registering when the GPU does not
  // report XIDs or refuses registration (both logged).
  absl::Status Register(const std::string& uuid);

  // Whether `uuid` is registered in the current set.
  bool Watches(const std::string& uuid) const;

  // Builds a fresh set with every GPU registered now and `returning`, then
  // hands events still queued in the old set to `pending` and frees it. When
  // NVML refuses a new set, registers `returning` in the old one instead.
  // Returns the GPUs NVML could not find for the new set, with why (they are
  // no longer watched: the caller marks them). An event that comes between a
  // GPU's new registration and the old set's draining is handed over twice
  // (once from each set): a double count is better than a lost XID.
  std::map<std::string, std::string> Rebuild(
      const std::string& returning, const std::function<void(const nvmlEventData_t&)>& pending);

  // nvmlEventSetWait_v2 on the set, instance ids preset to "none".
  nvmlReturn_t Wait(nvmlEventData_t* ev, std::chrono::milliseconds timeout);

  // The GPU an event's handle belongs to; "" when it is not one of ours.
  std::string UuidOf(nvmlDevice_t dev) const;

  void Free();

 private:
  nvmlReturn_t RegisterIn(nvmlEventSet_t set, const std::string& uuid,
                          std::map<nvmlDevice_t, std::string>* into, std::string* error);

  const nvml::NvmlLibrary& lib_;
  nvml::GpuHandles* const handles_;
  nvmlEventSet_t set_ = nullptr;
  std::map<nvmlDevice_t, std::string> uuid_by_handle_;
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_EVENT_REGISTRY_H_
