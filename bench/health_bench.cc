// The polled GPU health checks' cost: one poll of 8 GPUs in NVML calls per
// GPU and in time, through the NVML stand-in loaded by the real dlopen path
// (each call crossing its lock and control-FIFO check, as a driver call
// crosses into the kernel); and whether polls delay an XID: the time from
// an XID written to the stand-in to the watcher's report, with polls
// running back to back against none (the same run, the same machine).
//   health_bench [--smoke] [--markdown FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "health/health_poller.h"
#include "health/health_watcher.h"
#include "nvml/gpu_handles.h"
#include "nvml/inventory.h"
#include "nvml/nvml_library.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using Clock_ = std::chrono::steady_clock;
using testing::FakeNvmlDir;
using testing::FixturePath;
using testing::TempDir;
using testing::WaitFor;
using testing::WriteFifo;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())))];
}

struct Row {
  std::string figure, value, goal, verdict;
};

// NVML through the stand-in, on `fixture`, with a control FIFO.
struct Nvml {
  TempDir dir;
  std::string ctl;
  std::shared_ptr<const nvml::NvmlLibrary> lib;
  std::vector<std::string> uuids;

  explicit Nvml(const std::string& fixture) {
    std::filesystem::create_directories(dir.Join("usr/lib64"));
    std::filesystem::create_symlink(FakeNvmlDir() + "/libnvidia-ml.so.1",
                                    dir.Join("usr/lib64/libnvidia-ml.so.1"));
    ::setenv("FAKE_NVML_FIXTURE", FixturePath(fixture).c_str(), 1);
    ctl = dir.Join("ctl");
    ::setenv("FAKE_NVML_CONTROL", ctl.c_str(), 1);
    auto l = nvml::NvmlLibrary::Open(dir.path());
    if (!l.ok() || !(*l)->Init().ok()) {
      std::fprintf(stderr, "health_bench: cannot load the NVML stand-in\n");
      std::exit(1);
    }
    lib = std::shared_ptr<const nvml::NvmlLibrary>(std::move(*l));
    auto inv = nvml::DiscoverInventory(*lib, "/nonexistent");
    for (const auto& g : inv->gpus) uuids.push_back(g.uuid);
  }
};

// Polls of 8 GPUs: NVML calls per GPU per poll, and microseconds per poll.
void PollCost(const std::string& fixture, const std::string& what, int polls,
              std::vector<Row>* rows) {
  Nvml n(fixture);
  nvml::GpuHandles handles(*n.lib, n.uuids);
  health::HealthPoller poller(*n.lib, &handles, n.uuids, health::CheckSettings::Defaults(),
                              Clock::Real(), /*log_off=*/false);
  poller.Poll();  // discovery
  const uint64_t before = poller.poll_calls();
  std::vector<double> us;
  for (int i = 0; i < polls; ++i) {
    const auto t0 = Clock_::now();
    poller.Poll();
    us.push_back(std::chrono::duration<double, std::micro>(Clock_::now() - t0).count());
  }
  const double per_gpu = static_cast<double>(poller.poll_calls() - before) /
                         static_cast<double>(polls) / static_cast<double>(n.uuids.size());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", per_gpu);
  rows->push_back(
      {"NVML calls per GPU per poll, " + what, buf, "<= 10", per_gpu <= 10 ? "pass" : "FAIL"});
  std::snprintf(buf, sizeof buf, "%.0f us", Percentile(us, 50));
  rows->push_back(
      {"one poll of " + std::to_string(n.uuids.size()) + " GPUs, p50, " + what, buf, "", ""});
  std::snprintf(
      buf, sizeof buf, "%.0f discovery calls a GPU",
      static_cast<double>(poller.discovery_calls()) / static_cast<double>(n.uuids.size()));
  rows->push_back({"once per GPU, at its first poll, " + what, buf, "", ""});
}

// XID written -> the watcher's report, p50/p99/max in ms.
std::vector<double> XidLatency(bool polling, int xids) {
  Nvml n("8-gpu-pcie.yaml");
  health::HealthPolicy policy;
  policy.recovery_period = std::chrono::milliseconds(1);  // back at once, for the next XID
  policy.reset_xids.clear();
  policy.wait_timeout = std::chrono::milliseconds(200);
  // Back to back: a poll is always running or about to.
  policy.poll_interval = polling ? std::chrono::milliseconds(1) : std::chrono::hours(24);
  std::mutex mu;
  std::vector<Clock_::time_point> seen;
  int back = 0;
  auto watcher =
      health::HealthWatcher::Start(n.lib, n.uuids, {}, policy, [&](const health::HealthChange& c) {
        std::lock_guard<std::mutex> lock(mu);
        if (c.healthy) {
          ++back;
        } else {
          seen.push_back(Clock_::now());
        }
      });
  std::vector<double> ms;
  for (int i = 0; i < xids; ++i) {
    const int gpu = i % 8;
    const size_t before = [&] {
      std::lock_guard<std::mutex> lock(mu);
      return seen.size();
    }();
    // XID 94 (contained ECC): out at once, back once the GPU is probed.
    const auto t0 = Clock_::now();
    if (!WriteFifo(n.ctl, "xid " + std::to_string(gpu) + " 94")) break;
    if (!WaitFor([&] {
          std::lock_guard<std::mutex> lock(mu);
          return seen.size() > before;
        })) {
      break;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ms.push_back(std::chrono::duration<double, std::milli>(seen.back() - t0).count());
    }
    // Back in service before the next XID.
    if (!WaitFor([&] {
          std::lock_guard<std::mutex> lock(mu);
          return back > i;
        })) {
      break;
    }
  }
  watcher->Stop();
  return ms;
}

}  // namespace
}  // namespace gpu_agent

int main(int argc, char** argv) {
  using namespace gpu_agent;
  bool smoke = false;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      smoke = true;
    } else if (a == "--markdown" && i + 1 < argc) {
      markdown = argv[++i];
    } else {
      std::fprintf(stderr, "usage: health_bench [--smoke] [--markdown FILE]\n");
      return 2;
    }
  }
  std::vector<Row> rows;
  const int polls = smoke ? 5 : 1000;
  PollCost("8-gpu-nvlink.yaml", "8 V100 (NVLink read a link a call)", polls, &rows);
  PollCost("8-gpu-pcie.yaml", "8 L40S (PCIe only)", polls, &rows);
  const int xids = smoke ? 5 : 200;
  const std::vector<double> quiet = XidLatency(false, xids);
  const std::vector<double> busy = XidLatency(true, xids);
  char buf[96];
  for (double p : {50.0, 99.0}) {
    const double q = Percentile(quiet, p), b = Percentile(busy, p);
    std::snprintf(buf, sizeof buf, "%.2f ms (no polls: %.2f ms)", b, q);
    rows.push_back({"XID -> report with polls back to back, p" + std::to_string(int(p)), buf,
                    "within 1 poll of 8 GPUs of no polls", ""});
  }
  const double bmax = busy.empty() ? 0 : *std::max_element(busy.begin(), busy.end());
  const double qmax = quiet.empty() ? 0 : *std::max_element(quiet.begin(), quiet.end());
  std::snprintf(buf, sizeof buf, "%.2f ms (no polls: %.2f ms)", bmax, qmax);
  rows.push_back({"XID -> report with polls back to back, max", buf, "", ""});
  std::string out = "| figure | value | goal | verdict |\n|---|---|---|---|\n";
  for (const Row& r : rows) {
    out += "| " + r.figure + " | " + r.value + " | " + r.goal + " | " + r.verdict + " |\n";
  }
  out += "\nRuns: " + std::to_string(polls) + " polls of each fixture, " +
         std::to_string(quiet.size()) + " + " + std::to_string(busy.size()) +
         " XIDs, through the NVML stand-in (tests/doubles/nvml).\n";
  std::fputs(out.c_str(), stdout);
  if (!markdown.empty()) std::ofstream(markdown) << out;
  bool ok = quiet.size() == static_cast<size_t>(xids) && busy.size() == static_cast<size_t>(xids);
  for (const Row& r : rows) ok = ok && r.verdict != "FAIL";
  return ok ? 0 : 1;
}
