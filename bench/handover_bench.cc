// The live handover between plugin and DRA mode, the real binary against the
// kubelet stand-ins (device plugin with PodResources, DRA) and the API server
// stand-in, 8 GPUs on the NVML stand-in, two pods holding GPUs 0 and 1
// through the device plugin when the node's config label turns to DRA:
//  - label -> device plugin unregistered (the kubelet's allocatable at 0),
//    -> DRA plugin registered, -> first ResourceSlice create (the stand-in's
//    log), and the API server requests from the label change until the
//    slices hold the 6 free GPUs;
//  - label back -> slices deleted, -> device plugin registered again;
//  - the baseline, taken in the same run: a label change between two plugin
//    configs (a reload in the same mode) until the plugin registers again.
// Medians over --runs handovers (default 5).
//   handover_bench [--runs N] [--markdown FILE] [--smoke]
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "dra_kubelet.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kGpu[] = "nvidia.com/gpu";
constexpr char kLabel[] = "nvidia.com/device-plugin.config";
constexpr char kNode[] = "gpu-node-1";
constexpr char kDriver[] = "gpu.gpu-agent.github.io";
constexpr char kUuid0[] = "GPU-0eeb03b7-15a7-5ad5-8f6f-b0379ccc67f0";
constexpr char kUuid1[] = "GPU-29d1a1d2-61cc-53e1-a192-bc8f567efea0";

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// When the first request `call` (not a dry run) came at or after `t`.
Clock::time_point FirstAfter(const ApiServerStub& api, const std::string& call,
                             Clock::time_point t) {
  for (const auto& r : api.requests()) {
    if (r.at >= t && r.call == call && !r.dry_run) return r.at;
  }
  return Clock::time_point{};
}

size_t SliceDevices(const ApiServerStub& api) {
  size_t n = 0;
  for (const std::string& json : api.Slices(kNode)) {
    rapidjson::Document d;
    d.Parse(json.c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("spec")) continue;
    const auto& spec = d["spec"];
    if (spec.IsObject() && spec.HasMember("devices") && spec["devices"].IsArray()) {
      n += spec["devices"].Size();
    }
  }
  return n;
}

int Main(int argc, char** argv) {
  int runs = 5;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--markdown") && i + 1 < argc) {
      markdown = argv[++i];
    } else if (!std::strcmp(argv[i], "--smoke")) {
      runs = 1;
    } else {
      std::fprintf(stderr, "usage: handover_bench [--runs N] [--markdown FILE] [--smoke]\n");
      return 2;
    }
  }
  TempDir dir;
  if (!WriteFakeDriverRoot(dir.Join("driver"), "550.54.15")) return 1;
  WriteFakeDevRoot(dir.Join("devroot"), {0, 1, 2, 3, 4, 5, 6, 7}, {}, false);
  if (!WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir.Join("sys"))) return 1;
  ::mkdir(dir.Join("registry").c_str(), 0755);
  ::mkdir(dir.Join("plugins").c_str(), 0755);
  dir.Write("configs/plugin", "version: v1\nmode: plugin\n");
  dir.Write("configs/plugin-b", "version: v1\nmode: plugin\nflags:\n  failOnInitError: true\n");
  dir.Write("configs/dra", "version: v1\nmode: dra\n");
  ApiServerStub api;
  api.ServeResourceVersions({"v1"});
  api.AddNode(kNode);
  KubeletSimulator sim(dir.path());
  const std::string pod_resources = dir.Join("pod-resources.sock");
  if (!sim.Start() || !sim.ServePodResources(pod_resources)) return 1;
  DraKubelet::Options ko;
  ko.registry_dir = dir.Join("registry");
  DraKubelet dra(ko);
  if (!dra.Start()) return 1;
  Subprocess agent({BinaryPath(),
                    "run",
                    "--node-name",
                    kNode,
                    "--proxy=" + api.url(),
                    "--node-config-dir",
                    dir.Join("configs"),
                    "--node-config-default",
                    "plugin",
                    "--kubelet-socket",
                    sim.socket(),
                    "--pod-resources-socket",
                    pod_resources,
                    "--dra-registry-dir",
                    dir.Join("registry"),
                    "--dra-plugin-dir",
                    dir.Join("plugins"),
                    "--cdi-spec-dir",
                    dir.Join("cdi"),
                    "--nvidia-cdi-hook-path",
                    "",
                    "--nvidia-driver-root",
                    dir.Join("driver"),
                    "--dev-root",
                    dir.Join("devroot"),
                    "--sysfs-root",
                    dir.Join("sys"),
                    "--log-level",
                    "warning"},
                   FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml")));
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "handover_bench: %s\n%s\n", what, agent.Stderr().c_str());
    return 1;
  };
  constexpr auto kWait = std::chrono::seconds(30);
  if (!sim.WaitForAllocatable(kGpu, 8, kWait)) return fail("plugin mode did not register");

  std::vector<double> reload_ms, unregistered_ms, dra_registered_ms, first_slice_ms, requests,
      deleted_ms, plugin_back_ms;
  for (int run = 0; run < runs; ++run) {
    // The baseline: a reload in the same mode, until registered again.
    int before = sim.registrations();
    Clock::time_point t0 = Clock::now();
    api.SetLabel(kNode, kLabel, "plugin-b");
    if (!WaitFor([&] { return sim.registrations() > before; }, kWait) ||
        !sim.WaitForAllocatable(kGpu, 8, kWait)) {
      return fail("the same-mode reload did not register again");
    }
    reload_ms.push_back(Ms(Clock::now() - t0));

    v1beta1::AllocateResponse r;
    if (!sim.AdmitPod("ml", "a", "main", kGpu, {kUuid0}, &r).ok() ||
        !sim.AdmitPod("ml", "b", "main", kGpu, {kUuid1}, &r).ok()) {
      return fail("the pods were not admitted");
    }
    // Plugin to DRA.
    t0 = Clock::now();
    api.SetLabel(kNode, kLabel, "dra");
    Clock::time_point unregistered{}, registered{};
    const bool moved = WaitFor(
        [&] {
          const Clock::time_point now = Clock::now();
          if (unregistered == Clock::time_point{} && sim.Allocatable(kGpu) == 0) unregistered = now;
          if (registered == Clock::time_point{} && dra.plugin(kDriver).has_value()) {
            registered = now;
          }
          return unregistered != Clock::time_point{} && registered != Clock::time_point{} &&
                 SliceDevices(api) == 6;
        },
        kWait);
    if (!moved) return fail("the node did not move to DRA with GPUs 0 and 1 held");
    requests.push_back(api.RequestsSince(t0));
    unregistered_ms.push_back(Ms(unregistered - t0));
    dra_registered_ms.push_back(Ms(registered - t0));
    first_slice_ms.push_back(Ms(FirstAfter(api, "create resourceslices", t0) - t0));
    sim.EndPod("ml", "a");
    sim.EndPod("ml", "b");
    if (!WaitFor([&] { return SliceDevices(api) == 8; }, kWait)) {
      return fail("the GPUs the pods let go of were not offered");
    }
    // DRA to plugin.
    before = sim.registrations();
    t0 = Clock::now();
    api.SetLabel(kNode, kLabel, "plugin");
    if (!WaitFor([&] { return sim.registrations() > before; }, kWait) ||
        !sim.WaitForAllocatable(kGpu, 8, kWait)) {
      return fail("the node did not move back to the device plugin");
    }
    plugin_back_ms.push_back(Ms(Clock::now() - t0));
    if (!WaitFor([&] { return api.Slices(kNode).empty(); }, kWait)) {
      return fail("the slices were not deleted");
    }
    deleted_ms.push_back(Ms(FirstAfter(api, "delete resourceslices", t0) - t0));
  }
  agent.Signal(SIGTERM);
  if (agent.Wait() != 0) return fail("the agent did not exit cleanly");

  const double reload = Median(reload_ms), first_slice = Median(first_slice_ms);
  char table[2048];
  std::snprintf(
      table, sizeof table,
      "| figure (median of %d) | value |\n|---|---|\n"
      "| label to plugin mode reloaded, same mode (baseline) | %.1f ms |\n"
      "| plugin to DRA: label to device plugin unregistered (allocatable 0) | %.1f ms |\n"
      "| plugin to DRA: label to DRA plugin registered | %.1f ms |\n"
      "| plugin to DRA: label to first ResourceSlice created | %.1f ms (%.2fx the baseline) |\n"
      "| plugin to DRA: API server requests until the slices hold the 6 free GPUs | %.0f |\n"
      "| DRA to plugin: label to slices deleted | %.1f ms |\n"
      "| DRA to plugin: label to device plugin registered, 8 allocatable | %.1f ms |\n",
      runs, reload, Median(unregistered_ms), Median(dra_registered_ms), first_slice,
      reload > 0 ? first_slice / reload : 0, Median(requests), Median(deleted_ms),
      Median(plugin_back_ms));
  std::printf("%s", table);
  if (!markdown.empty()) std::ofstream(markdown) << table;
  return 0;
}

}  // namespace
}  // namespace gpu_agent::testing

int main(int argc, char** argv) { return gpu_agent::testing::Main(argc, argv); }
