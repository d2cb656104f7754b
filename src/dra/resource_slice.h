// The ResourceSlices that publish a node's devices, as a pure function of
// the devices: resource.k8s.io/v1 objects (v1beta2 the same; v1beta1 with
// each device's fields under `basic`), one pool named after the node, at
// most kMaxDevicesPerSlice devices a slice, every slice of the pool carrying
// the pool's generation and its slice count.
#ifndef GPU_AGENT_DRA_RESOURCE_SLICE_H_
#define GPU_AGENT_DRA_RESOURCE_SLICE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "dra/device_taint.h"
#include "dra/dra_device.h"

namespace gpu_agent::dra {

// The API's limit on devices in one slice (without taints or counters).
inline constexpr size_t kMaxDevicesPerSlice = 128;
// ... and in a slice where a device has taints.
inline constexpr size_t kMaxDevicesPerTaintedSlice = 64;

struct SliceInput {
  std::string api_version = "v1";  // v1 | v1beta2 | v1beta1
  std::string driver;
  std::string node;      // the node name, also the pool's name
  std::string node_uid;  // the Node's UID for ownerReferences; empty: none
  int64_t pool_generation = 1;
  std::vector<DraDevice> devices;
  // Devices (of `devices`) published with a taint, by name: under
  // resource.k8s.io v1 and v1beta2 in the device's `taints`, v1beta1 in
  // `basic.taints`; the server sets timeAdded.
  std::map<std::string, DeviceTaint> tainted;
  // The server serves consumable capacity (DRAConsumableCapacity): a shared
  // device (DraDevice::sharing) is published once, allowing multiple
  // allocations, with its "shares" and each capacity's request policy.
  // Otherwise it is published whole, for one claim at a time.
  bool consumable_capacity = false;
};

// A shared device's "shares" capacity (its value and request policy): each
// claim takes 1 unless it asks for more, up to `most_per_claim`, of
// `shares`.
void WriteSharesCapacity(json::Writer& w, int shares, int most_per_claim);

// `reason` ("XID 79") as a label value ("XID-79"): characters other than
// [A-Za-z0-9._-] made '-', at most 63, starting and ending alphanumeric;
// "Unhealthy" when nothing is left.
std::string TaintValue(const std::string& reason);

// Each slice as a JSON object. No devices still gives one slice, empty, so
// the scheduler learns the pool is there and has nothing. Slice names are
// "<node>-<driver>-<n>", so a publisher finds its own by name.
std::vector<std::string> BuildResourceSlices(const SliceInput& input);

// "<node>-<driver>-<n>"; past the 253 characters of an object name,
// "<node, cut>-<8 hex of a CRC-32C of the node's name>-<driver>-<n>".
std::string SliceName(const std::string& node, const std::string& driver, size_t n);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_RESOURCE_SLICE_H_
