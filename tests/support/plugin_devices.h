// Device records for the device-plugin tests, fuzz targets and benchmarks:
// GPUs advertised whole or as time-sliced replicas, and the DGX-1 cube
// mesh's link scores. Header-only, so targets without GoogleTest (fuzzers,
// benchmarks) use it too.
#ifndef GPU_AGENT_TESTS_SUPPORT_PLUGIN_DEVICES_H_
#define GPU_AGENT_TESTS_SUPPORT_PLUGIN_DEVICES_H_

#include <functional>
#include <string>
#include <vector>

#include "deviceplugin/device.h"

namespace gpu_agent::testing {

// DGX-1 hybrid cube mesh: NV2 = 260, NV1 = 160, otherwise 10 (SYS).
inline std::vector<std::vector<int>> CubeMeshScores() {
  std::vector<std::vector<int>> s(8, std::vector<int>(8, 10));
  const int pairs[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1},
                          {1, 5, 2}, {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1},
                          {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  for (auto& p : pairs) s[p[0]][p[1]] = s[p[1]][p[0]] = 100 * p[2] + 60;
  for (int i = 0; i < 8; ++i) s[i][i] = 0;
  return s;
}

// `gpus` GPUs, each as `replicas` devices ("<uuid>::<n>" when more than
// one): GPU g has UUID uuid_of(g), NUMA node g / 4 and /dev/nvidia<g>.
inline std::vector<deviceplugin::PluginDevice> GpuDevices(
    int gpus, int replicas, const std::function<std::string(int)>& uuid_of) {
  std::vector<deviceplugin::PluginDevice> out;
  for (int g = 0; g < gpus; ++g) {
    for (int r = 0; r < replicas; ++r) {
      deviceplugin::PluginDevice d;
      d.key.uuid = uuid_of(g);
      d.gpu_id = d.key.uuid;
      d.id = replicas > 1 ? d.gpu_id + "::" + std::to_string(r) : d.gpu_id;
      d.physical = g;
      d.numa_node = g / 4;
      d.device_nodes = {"/dev/nvidia" + std::to_string(g)};
      out.push_back(d);
    }
  }
  return out;
}

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_PLUGIN_DEVICES_H_
