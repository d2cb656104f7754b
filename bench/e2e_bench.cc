// End-to-end figures of plugin and static mode, each against a baseline or
// budget: the real gpu-agent binary, the kubelet simulator and the API server
// stand-in in this process, the NVML stand-in driven through its FIFO.
//   e2e_bench [--smoke] [--idle-seconds N] [--idle-only] [--cores N] [--markdown FILE]
// --idle-only measures only the idle agent (footprint and each thread's
// wake-ups). --cores N tells the agent it has N cores (an LD_PRELOAD shim),
// so gRPC sizes its pools as on an N-core node. GPU_AGENT_BINARY=path
// measures another build of the agent.
// --smoke runs tiny counts so CI keeps the bench compiling and running; it
// prints the table but judges nothing.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "kubelet_simulator.h"
#include "support/test_support.h"

namespace gpu_agent::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Us = std::chrono::duration<double, std::micro>;
constexpr const char* kGpu = "nvidia.com/gpu";

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[i];
}

struct Row {
  std::string figure;
  std::string value;
  std::string budget;
  std::string verdict;  // pass / FAIL / info
};

// --cores N: the agent is told it has N cores (bench/cores_shim.cc).
int g_cores = 0;

struct Env {
  TempDir dir;
  std::string ctl = dir.Join("nvml.ctl");
  std::string fixture = FixturePath("8-gpu-nvlink.yaml");
  std::string sys = dir.Join("sys");
};

std::unique_ptr<Subprocess> StartAgent(Env& env, KubeletSimulator& sim,
                                       std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {BinaryPath(),   "run",   "--kubelet-socket", sim.socket(),
                                   "--sysfs-root", env.sys, "--log-level",      "warning"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto e = FakeNvmlEnv(env.fixture);
  e["FAKE_NVML_CONTROL"] = env.ctl;
  if (g_cores > 0) {
    e["LD_PRELOAD"] = CORES_SHIM;
    e["BENCH_CORES"] = std::to_string(g_cores);
  }
  return std::make_unique<Subprocess>(args, e);
}

// Start -> registered, over `runs` fresh processes.
std::vector<double> StartToRegistered(int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    Env env;
    (void)WriteFixtureSysfs(env.fixture, env.sys);
    KubeletSimulator sim(env.dir.path());
    if (!sim.Start()) return ms;
    const auto t0 = Clock::now();
    auto agent = StartAgent(env, sim);
    if (!sim.WaitForRegistrations(1)) {
      std::fprintf(stderr, "agent did not register:\n%s\n", agent->Stderr().c_str());
      return ms;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    agent->Signal(SIGTERM);
    agent->Wait();
  }
  return ms;
}

template <typename Call>
std::vector<double> Time(int n, Call call) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    call();
    us.push_back(Us(Clock::now() - t0).count());
  }
  return us;
}

struct ProcSample {
  long ticks = 0;
  long switches = 0;
  long rss_kib = 0;
  long rss_anon_kib = 0;
  // Per thread: "<name>/<tid>" -> context switches so far.
  std::map<std::string, long> thread_switches;
};

ProcSample Sample(pid_t pid) {
  ProcSample s;
  s.ticks = CpuTicks(pid);
  const std::string base = "/proc/" + std::to_string(pid);
  for (const std::string& line : [&] {
         std::vector<std::string> lines;
         std::istringstream in(ReadFile(base + "/status"));
         for (std::string l; std::getline(in, l);) lines.push_back(l);
         return lines;
       }()) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kib = std::stol(line.substr(6));
    if (line.rfind("RssAnon:", 0) == 0) s.rss_anon_kib = std::stol(line.substr(8));
  }
  // Context switches summed over every thread.
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(base + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::istringstream in(ReadFile(it->path().string() + "/status"));
    long n = 0;
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("voluntary_ctxt_switches:", 0) == 0) n += std::stol(l.substr(24));
      if (l.rfind("nonvoluntary_ctxt_switches:", 0) == 0) n += std::stol(l.substr(27));
    }
    s.switches += n;
    std::string name = ReadFile(it->path().string() + "/comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    s.thread_switches[name + "/" + it->path().filename().string()] = n;
  }
  return s;
}

std::string Fmt(double v, const char* unit, int precision = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", precision, v, unit);
  return buf;
}

// Idle: registered with an open stream, nothing happening. Adds the rows,
// and prints each thread's wake-ups (where a floor comes from).
template <typename Judge>
bool MeasureIdle(Env& env, int idle_seconds, int allocates, Judge judge, std::vector<Row>* rows) {
  KubeletSimulator idle_sim(env.dir.path());
  if (!idle_sim.Start()) return false;
  auto idle_agent = StartAgent(env, idle_sim);
  if (!idle_sim.WaitForDevices(kGpu, [](const auto& d) { return d.size() == 8; })) {
    std::fprintf(stderr, "agent not serving:\n%s\n", idle_agent->Stderr().c_str());
    return false;
  }
  const ProcSample s0 = Sample(idle_agent->pid());
  MeasurementWindow(std::chrono::seconds(idle_seconds));
  const ProcSample s1 = Sample(idle_agent->pid());
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double cpu_pct = 100.0 * static_cast<double>(s1.ticks - s0.ticks) / hz / idle_seconds;
  const double wakeups = static_cast<double>(s1.switches - s0.switches) / idle_seconds;
  rows->push_back({"idle VmRSS", Fmt(static_cast<double>(s1.rss_kib) / 1024.0, "MiB"), "< 12 MiB",
                   judge(s1.rss_kib < 12 * 1024)});
  rows->push_back({"idle RssAnon", Fmt(static_cast<double>(s1.rss_anon_kib) / 1024.0, "MiB"),
                   "<= 1.9 MiB", judge(s1.rss_anon_kib <= 1946)});
  rows->push_back({"idle wake-ups (context switches, all threads) per second",
                   Fmt(wakeups, "/s", 2), "<= 2 /s", judge(wakeups <= 2.0)});
  rows->push_back({"idle threads", Fmt(static_cast<double>(s1.thread_switches.size()), "", 0),
                   "<= 6", judge(s1.thread_switches.size() <= 6)});
  rows->push_back({"idle CPU", Fmt(cpu_pct, "% of a core", 3), "< 0.1%", judge(cpu_pct < 0.1)});
  // RSS after a burst of work: 100,000 Allocates, then back to idle.
  if (allocates > 0) {
    auto stub = idle_sim.Stub(kGpu);
    const std::vector<v1beta1::Device> devices = idle_sim.Devices(kGpu);
    v1beta1::AllocateRequest alloc;
    alloc.add_container_requests()->add_devices_ids(devices.at(2).id());
    int failed = 0;
    for (int i = 0; i < allocates; ++i) {
      grpc::ClientContext ctx;
      v1beta1::AllocateResponse r;
      if (!stub->Allocate(&ctx, alloc, &r).ok()) ++failed;
    }
    const ProcSample s2 = Sample(idle_agent->pid());
    const double grew_mib = static_cast<double>(s2.rss_kib - s1.rss_kib) / 1024.0;
    rows->push_back({"VmRSS growth after " + std::to_string(allocates) + " Allocates (" +
                         std::to_string(failed) + " failed)",
                     Fmt(grew_mib, "MiB", 2), "<= 1 MiB", judge(grew_mib <= 1.0 && failed == 0)});
    // The anonymous part alone: what a leak would grow. (VmRSS also counts
    // the code of the Allocate path, read back in after the agent released
    // its start-up pages.)
    const double anon_mib = static_cast<double>(s2.rss_anon_kib - s1.rss_anon_kib) / 1024.0;
    rows->push_back({"RssAnon growth after " + std::to_string(allocates) + " Allocates",
                     Fmt(anon_mib, "MiB", 2), "<= 1 MiB", judge(anon_mib <= 1.0 && failed == 0)});
    rows->push_back({"VmRSS after " + std::to_string(allocates) + " Allocates",
                     Fmt(static_cast<double>(s2.rss_kib) / 1024.0, "MiB"), "< 12 MiB",
                     judge(s2.rss_kib < 12 * 1024)});
  }
  std::printf("idle wake-ups per thread (%d s, %ld cores%s):\n", idle_seconds,
              g_cores > 0 ? long{g_cores} : sysconf(_SC_NPROCESSORS_ONLN),
              g_cores > 0 ? " as the agent is told" : "");
  for (const auto& [thread, n] : s1.thread_switches) {
    auto before = s0.thread_switches.find(thread);
    const long d = n - (before == s0.thread_switches.end() ? 0 : before->second);
    std::printf("  %-28s %6.2f /s\n", thread.c_str(), static_cast<double>(d) / idle_seconds);
  }
  idle_agent->Signal(SIGTERM);
  idle_agent->Wait();
  return true;
}

int Main(int argc, char** argv) {
  bool smoke = false;
  bool idle_only = false;
  int idle_seconds = 30;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) smoke = true;
    if (std::strcmp(argv[i], "--idle-only") == 0) idle_only = true;
    if (std::strcmp(argv[i], "--cores") == 0 && i + 1 < argc) g_cores = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--idle-seconds") == 0 && i + 1 < argc)
      idle_seconds = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--markdown") == 0 && i + 1 < argc) markdown = argv[++i];
  }
  if (smoke) idle_seconds = 1;
  const int rpcs = smoke ? 200 : 20000;
  const int xids = smoke ? 5 : 200;
  const int starts = smoke ? 2 : 20;
  std::vector<Row> rows;
  auto judge = [&](bool ok) { return smoke ? "info" : (ok ? "pass" : "FAIL"); };
  if (idle_only) {
    Env env;
    (void)WriteFixtureSysfs(env.fixture, env.sys);
    if (!MeasureIdle(env, idle_seconds, /*allocates=*/100000, judge, &rows)) return 1;
    for (const Row& r : rows) {
      std::printf("| %s | %s | %s | %s |\n", r.figure.c_str(), r.value.c_str(), r.budget.c_str(),
                  r.verdict.c_str());
    }
    return 0;
  }

  // 1. Start -> registered.
  auto start_ms = StartToRegistered(starts);
  const double start_p50 = Percentile(start_ms, 50);
  rows.push_back(
      {"start -> registered, p50", Fmt(start_p50, "ms"), "< 20 ms", judge(start_p50 < 20)});

  Env env;
  (void)WriteFixtureSysfs(env.fixture, env.sys);
  KubeletSimulator sim(env.dir.path());
  if (!sim.Start()) return 1;
  auto agent = StartAgent(env, sim, {"--health-recovery-period", "20ms"});
  if (!sim.WaitForDevices(kGpu, [](const auto& d) { return d.size() == 8; })) {
    std::fprintf(stderr, "agent not serving:\n%s\n", agent->Stderr().c_str());
    return 1;
  }
  auto stub = sim.Stub(kGpu);
  std::vector<std::string> ids;
  for (const auto& d : sim.Devices(kGpu)) ids.push_back(d.id());

  // 2. Allocate and GetPreferredAllocation vs the near-empty
  //    GetDevicePluginOptions, interleaved on the same channel.
  v1beta1::AllocateRequest alloc;
  alloc.add_container_requests()->add_devices_ids(ids[2]);
  v1beta1::PreferredAllocationRequest pref;
  auto* pc = pref.add_container_requests();
  for (const auto& id : ids) pc->add_available_deviceids(id);
  pc->set_allocation_size(4);
  std::vector<double> empty_us, alloc_us, pref_us;
  for (int round = 0; round < rpcs; ++round) {
    auto one = [&](auto fn) {
      grpc::ClientContext ctx;
      const auto t0 = Clock::now();
      fn(ctx);
      return Us(Clock::now() - t0).count();
    };
    empty_us.push_back(one([&](grpc::ClientContext& ctx) {
      v1beta1::Empty e;
      v1beta1::DevicePluginOptions o;
      stub->GetDevicePluginOptions(&ctx, e, &o);
    }));
    alloc_us.push_back(one([&](grpc::ClientContext& ctx) {
      v1beta1::AllocateResponse r;
      stub->Allocate(&ctx, alloc, &r);
    }));
    pref_us.push_back(one([&](grpc::ClientContext& ctx) {
      v1beta1::PreferredAllocationResponse r;
      stub->GetPreferredAllocation(&ctx, pref, &r);
    }));
  }
  const double e50 = Percentile(empty_us, 50), a50 = Percentile(alloc_us, 50),
               a99 = Percentile(alloc_us, 99), p50 = Percentile(pref_us, 50);
  rows.push_back({"GetDevicePluginOptions round trip p50 (baseline)", Fmt(e50, "us"), "-", "info"});
  rows.push_back({"Allocate round trip p50 / baseline p50", Fmt(a50 / e50, "x", 3), "<= 1.05x",
                  judge(a50 / e50 <= 1.05)});
  rows.push_back({"Allocate round trip p99", Fmt(a99, "us"), "< 1000 us", judge(a99 < 1000)});
  rows.push_back({"GetPreferredAllocation (8 GPUs, size 4) p50 / baseline p50",
                  Fmt(p50 / e50, "x", 3), "<= 1.3x", judge(p50 / e50 <= 1.3)});

  // 3. XID injected -> Unhealthy seen by the simulator.
  std::vector<double> xid_ms;
  for (int i = 0; i < xids; ++i) {
    const int gpu = i % 8;
    const size_t before = sim.Updates(kGpu).size();
    const auto t0 = Clock::now();
    if (!WriteFifo(env.ctl, "xid " + std::to_string(gpu) + " 79")) break;
    if (!sim.WaitForDevices(kGpu, [&](const auto& d) {
          return d[static_cast<size_t>(gpu)].health() == "Unhealthy";
        }))
      break;
    const auto updates = sim.Updates(kGpu);
    for (size_t u = before; u < updates.size(); ++u) {
      if (updates[u].devices[static_cast<size_t>(gpu)].health() == "Unhealthy") {
        xid_ms.push_back(std::chrono::duration<double, std::milli>(updates[u].at - t0).count());
        break;
      }
    }
    // Off the bus needs a reset before the GPU comes back.
    if (!WriteFifo(env.ctl, "reset " + std::to_string(gpu))) break;
    sim.WaitForDevices(kGpu, [&](const auto& d) {
      return std::all_of(d.begin(), d.end(), [](const auto& x) { return x.health() == "Healthy"; });
    });
  }
  const double x50 = Percentile(xid_ms, 50), x99 = Percentile(xid_ms, 99),
               xmax = xid_ms.empty() ? 0 : *std::max_element(xid_ms.begin(), xid_ms.end());
  rows.push_back(
      {"XID -> Unhealthy at the kubelet, p50", Fmt(x50, "ms", 2), "< 1 ms", judge(x50 < 1)});
  rows.push_back(
      {"XID -> Unhealthy at the kubelet, p99", Fmt(x99, "ms", 2), "< 10 ms", judge(x99 < 10)});
  rows.push_back(
      {"XID -> Unhealthy at the kubelet, max", Fmt(xmax, "ms", 2), "< 5 ms", judge(xmax < 5)});

  // 4. Idle: registered with an open stream, nothing happening.
  agent->Signal(SIGTERM);
  agent->Wait();
  sim.Stop();
  if (!MeasureIdle(env, idle_seconds, smoke ? 100 : 100000, judge, &rows)) return 1;

  // 5. Static mode against the API server stand-in: requests sent while
  // nothing changes, and how fast a zeroed capacity is repaired. Two
  // zeroings per agent process: a third within two minutes would be (rightly)
  // taken for a fight with another writer and no longer repaired at once.
  const int steady_seconds = smoke ? 1 : idle_seconds;
  const int drift_agents = smoke ? 2 : 25;
  std::vector<double> drift_ms;
  double steady_patches_per_hour = -1, steady_requests_per_hour = -1;
  for (int run = 0; run < drift_agents; ++run) {
    ApiServerStub api;
    api.AddNode("bench-node");
    auto e = FakeNvmlEnv(env.fixture);
    e["KUBERNETES_SERVICE_HOST"] = "<unset>";
    Subprocess sagent({BinaryPath(), "run", "--mode", "static", "--node-name", "bench-node",
                       "--proxy=" + api.url(), "--sysfs-root", env.sys, "--log-level", "warning"},
                      e);
    if (!WaitFor(
            [&] { return api.Capacity("bench-node", kGpu) == "8" && api.watch_count() >= 1; })) {
      std::fprintf(stderr, "static mode never settled:\n%s\n", sagent.Stderr().c_str());
      return 1;
    }
    if (run == 0) {
      const int p0 = api.patch_count(), g0 = api.get_count(), w0 = api.watch_count();
      MeasurementWindow(std::chrono::seconds(steady_seconds));
      const double per_hour = 3600.0 / steady_seconds;
      steady_patches_per_hour = (api.patch_count() - p0) * per_hour;
      steady_requests_per_hour =
          (api.patch_count() - p0 + api.get_count() - g0 + api.watch_count() - w0) * per_hour;
    }
    for (int z = 0; z < 2; ++z) {
      const auto t0 = Clock::now();
      api.KubeletSetsCapacity("bench-node", kGpu, "0");
      if (!WaitFor([&] { return api.Capacity("bench-node", kGpu) == "8"; },
                   std::chrono::seconds(5))) {
        std::fprintf(stderr, "drift not repaired:\n%s\n", sagent.Stderr().c_str());
        return 1;
      }
      drift_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    sagent.Signal(SIGTERM);
    sagent.Wait();
  }
  rows.push_back({"static: PATCH requests per steady hour", Fmt(steady_patches_per_hour, "/h", 0),
                  "0", judge(steady_patches_per_hour == 0)});
  rows.push_back({"static: all requests per steady hour (GET, PATCH, watch)",
                  Fmt(steady_requests_per_hour, "/h", 0), "-", "info"});
  const double d50 = Percentile(drift_ms, 50), d99 = Percentile(drift_ms, 99);
  rows.push_back({"static: drift repair (zeroed -> restored), p50", Fmt(d50, "ms", 1), "< 1000 ms",
                  judge(d50 < 1000)});
  rows.push_back({"static: drift repair (zeroed -> restored), p99", Fmt(d99, "ms", 1), "< 1000 ms",
                  judge(d99 < 1000)});

  std::ostringstream table;
  table << "| figure | value | budget | result |\n|---|---|---|---|\n";
  for (const Row& r : rows) {
    table << "| " << r.figure << " | " << r.value << " | " << r.budget << " | " << r.verdict
          << " |\n";
  }
  table << "\nRuns: " << starts << " starts, " << rpcs << " interleaved rounds of each RPC, "
        << xid_ms.size() << " XIDs, " << idle_seconds << " s idle; static mode: " << steady_seconds
        << " s steady (counted per hour), " << drift_ms.size() << " zeroings over " << drift_agents
        << " agents.\n";
  std::printf("%s", table.str().c_str());
  if (!markdown.empty()) std::ofstream(markdown) << table.str();
  return 0;
}

}  // namespace
}  // namespace gpu_agent::testing

int main(int argc, char** argv) { return gpu_agent::testing::Main(argc, argv); }
