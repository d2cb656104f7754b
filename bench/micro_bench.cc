// Micro-benchmarks of the hot paths: building Allocate responses,
// GetPreferredAllocation on NVLink and PCIe topologies, the ListAndWatch
// message for 1,000 devices, config parsing.
#include <benchmark/benchmark.h>

#include "agent/config/config_loader.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/device_plugin_service.h"
#include "deviceplugin/preferred_allocation.h"
#include "support/plugin_devices.h"

namespace gpu_agent::deviceplugin {
namespace {

// NVLink: GPUs in islands of 8 with double links inside (DGX-like);
// PCIe: pairs on a switch, four per socket, two sockets per 8.
std::vector<std::vector<int>> Topology(int n, bool nvlink) {
  std::vector<std::vector<int>> s(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n)));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int v = 0;
      if (i != j) {
        if (nvlink) {
          v = i / 8 == j / 8 ? ((i ^ j) == 3 || (i ^ j) == 4 ? 260 : 160) : 10;
        } else {
          v = i / 2 == j / 2 ? 50 : (i / 4 == j / 4 ? 30 : 10);
        }
      }
      s[static_cast<size_t>(i)][static_cast<size_t>(j)] = v;
    }
  }
  return s;
}

ResourceSpec Spec(int gpus, int replicas, bool nvlink) {
  ResourceSpec spec;
  spec.resource_name = "nvidia.com/gpu";
  spec.replicated = replicas > 1;
  spec.devices = testing::GpuDevices(gpus, replicas, [](int g) {
    return "GPU-" + std::to_string(g) + "-0000-1111-2222-333333333333";
  });
  spec.link_score = Topology(gpus, nvlink);
  return spec;
}

void BM_Allocate(benchmark::State& state, std::vector<std::string> strategies, bool specs) {
  AllocateOptions opts;
  opts.device_list = *DeviceListStrategies::Parse(strategies);
  opts.pass_device_specs = specs;
  Allocator alloc(opts);
  DevicePublisher pub(Spec(8, 1, true));
  auto snap = pub.Current();
  v1beta1::ContainerAllocateRequest req;
  for (int i = 0; i < state.range(0); ++i)
    req.add_devices_ids(snap->devices[static_cast<size_t>(i)].id);
  for (auto _ : state) {
    v1beta1::ContainerAllocateResponse out;
    benchmark::DoNotOptimize(alloc.AllocateContainer(*snap, req, &out));
  }
}
BENCHMARK_CAPTURE(BM_Allocate, envvar, {"envvar"}, false)->Arg(1)->Arg(8);
BENCHMARK_CAPTURE(BM_Allocate, volume_mounts, {"volume-mounts"}, false)->Arg(1)->Arg(8);
BENCHMARK_CAPTURE(BM_Allocate, cdi_annotations, {"cdi-annotations"}, false)->Arg(1)->Arg(8);
BENCHMARK_CAPTURE(BM_Allocate, cdi_cri, {"cdi-cri"}, false)->Arg(1)->Arg(8);
BENCHMARK_CAPTURE(BM_Allocate, envvar_device_specs, {"envvar"}, true)->Arg(1)->Arg(8);

void BM_PreferredAllocation(benchmark::State& state, bool nvlink) {
  const int gpus = static_cast<int>(state.range(0));
  const int size = static_cast<int>(state.range(1));
  DevicePublisher pub(Spec(gpus, 1, nvlink));
  auto snap = pub.Current();
  std::vector<std::string> avail;
  for (const auto& d : snap->devices) avail.push_back(d.id);
  for (auto _ : state) {
    auto r = PreferredAllocation(*snap, avail, {}, size);
    benchmark::DoNotOptimize(r);
  }
}
void PreferredArgs(benchmark::internal::Benchmark* b) {
  for (int gpus : {2, 4, 8, 16}) {
    for (int size = 1; size <= gpus; ++size) b->Args({gpus, size});
  }
}
BENCHMARK_CAPTURE(BM_PreferredAllocation, nvlink, true)->Apply(PreferredArgs);
BENCHMARK_CAPTURE(BM_PreferredAllocation, pcie, false)->Apply(PreferredArgs);

void BM_PreferredAllocationReplicas(benchmark::State& state) {
  DevicePublisher pub(Spec(8, 10, true));
  auto snap = pub.Current();
  std::vector<std::string> avail;
  for (const auto& d : snap->devices) avail.push_back(d.id);
  for (auto _ : state) {
    auto r = PreferredAllocation(*snap, avail, {}, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_PreferredAllocationReplicas)->Arg(1)->Arg(4)->Arg(16);

// 8 GPUs x 7 MIG-sized slots x 18 replicas ~ 1,000 devices.
void BM_ListAndWatchMessage(benchmark::State& state) {
  DevicePublisher pub(Spec(56, 18, true));
  auto snap = pub.Current();
  v1beta1::ListAndWatchResponse msg;
  std::string wire;
  for (auto _ : state) {
    FillListAndWatch(*snap, &msg);
    msg.SerializeToString(&wire);
    benchmark::DoNotOptimize(wire);
  }
  state.counters["devices"] = static_cast<double>(snap->devices.size());
  state.counters["bytes"] = static_cast<double>(wire.size());
}
BENCHMARK(BM_ListAndWatchMessage);

void BM_ConfigParse(benchmark::State& state) {
  const std::string yaml = R"(version: v1
flags:
  migStrategy: none
  failOnInitError: true
  nvidiaDriverRoot: /run/nvidia/driver
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: [envvar, cdi-annotations]
    deviceIDStrategy: uuid
sharing:
  timeSlicing:
    renameByDefault: false
    resources:
    - name: nvidia.com/gpu
      replicas: 10
)";
  for (auto _ : state) {
    LoadedConfig out;
    benchmark::DoNotOptimize(ParseConfigYaml(yaml, "config.yaml", &out));
  }
}
BENCHMARK(BM_ConfigParse);

}  // namespace
}  // namespace gpu_agent::deviceplugin

BENCHMARK_MAIN();
