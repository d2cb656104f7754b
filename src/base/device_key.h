// Names what device health is about, the same way in every room: a whole GPU
// (its MIG devices with it), one MIG GPU instance (its compute instances with
// it), or one compute instance in a GPU instance. The health watcher reports
// outages by such keys, and every advertised device carries the key of the
// unit it is, so whether an outage takes a device out is one comparison.
#ifndef GPU_AGENT_BASE_DEVICE_KEY_H_
#define GPU_AGENT_BASE_DEVICE_KEY_H_

#include <compare>
#include <string>
#include <utility>

namespace gpu_agent {

struct DeviceKey {
  // An instance id that names no instance: the key is about everything above it.
  static constexpr int kWhole = -1;

  std::string uuid;               // the physical GPU's UUID
  int gpu_instance = kWhole;      // MIG GPU instance id; kWhole: the whole GPU
  int compute_instance = kWhole;  // MIG compute instance id; kWhole: the whole GPU instance

  // The whole GPU `uuid`, MIG devices included.
  static DeviceKey Gpu(std::string uuid) { return {std::move(uuid), kWhole, kWhole}; }

  bool IsWholeGpu() const { return gpu_instance < 0; }

  // Whether an outage of this key takes the device keyed `device` out: the
  // same GPU, and, when this key names an instance, the same instance (a GPU
  // instance covers each of its compute instances).
  bool Covers(const DeviceKey& device) const {
    if (device.uuid != uuid) return false;
    if (gpu_instance < 0) return true;
    if (device.gpu_instance != gpu_instance) return false;
    return compute_instance < 0 || device.compute_instance == compute_instance;
  }

  // "GPU-..." or "GPU-... GPU instance 1 compute instance 0", for logs.
  std::string ToString() const;

  // Ordered by uuid, then GPU instance, then compute instance.
  friend bool operator==(const DeviceKey&, const DeviceKey&) = default;
  friend auto operator<=>(const DeviceKey&, const DeviceKey&) = default;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_DEVICE_KEY_H_
