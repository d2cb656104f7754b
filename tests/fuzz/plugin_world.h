// The node both device-plugin fuzz targets serve: an 8-GPU NVLink node
// (DGX-1 cube mesh) advertised whole, as 4 time-sliced replicas spread, or
// packed, with GPUs 2 and 5 out; and Allocate option sets (every device-list
// strategy, with and without device specs, against a dev root that has the
// control nodes).
#ifndef GPU_AGENT_TESTS_FUZZ_PLUGIN_WORLD_H_
#define GPU_AGENT_TESTS_FUZZ_PLUGIN_WORLD_H_

#include <memory>
#include <vector>

#include "deviceplugin/allocator.h"
#include "deviceplugin/device_publisher.h"

namespace gpu_agent::fuzz {

struct World {
  std::vector<std::shared_ptr<deviceplugin::DevicePublisher>> publishers;
  std::vector<std::shared_ptr<const deviceplugin::Allocator>> allocators;
};

// Made once per process.
const World& TheWorld();

// QuietLogs(), and protobuf's own lines dropped: it logs an error for every
// string field that is not UTF-8, a line per input that would swamp the run.
void QuietPluginLogs();

}  // namespace gpu_agent::fuzz

#endif  // GPU_AGENT_TESTS_FUZZ_PLUGIN_WORLD_H_
