// End-to-end figures of plugin and static mode, each against a baseline or
// budget: the real gpu-agent binary, the kubelet simulator and the API server
// stand-in in this process, the NVML stand-in driven through its FIFO.
//   e2e_bench [--smoke] [--idle-seconds N] [--idle-only] [--runs N] [--allocates N]
//             [--cores N] [--binary LABEL=PATH]... [--markdown FILE]
//             [--real-nvml --gpus N]
// --idle-only measures only the idle agent: its memory as it costs (RssAnon,
// PSS, peak, and the working set a kubelet reads, from a memory cgroup of
// the agent's own where one can be made), each thread's wake-ups, and the
// same memory figures after --allocates Allocates (100,000). --runs N takes
// the median of N agents. --cores N tells the agent it has N cores (an
// LD_PRELOAD shim), so gRPC sizes its pools as on an N-core node.
// GPU_AGENT_BINARY=path measures another build of the agent; --binary
// LABEL=PATH, repeated, measures the idle figures of several builds side by
// side, taking turns in one session.
// --real-nvml --gpus N: on a GPU machine, the machine's own NVML and sysfs
// (no stand-in): start -> registered and the --idle-only figures, the agent
// serving N GPUs.
// --smoke runs tiny counts so CI keeps the bench compiling and running; it
// prints the table but judges nothing.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "kubelet_simulator.h"
#include "memory_cgroup.h"
#include "process_memory.h"
#include "support/agent_env.h"

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
// --real-nvml: the agent loads the machine's own NVML and reads its sysfs
// (a GPU machine: scripts/gpu-check.sh); g_gpus is how many GPUs it serves.
bool g_real_nvml = false;
size_t g_gpus = 8;

struct Env {
  TempDir dir;
  std::string ctl = dir.Join("nvml.ctl");
  std::string fixture = FixturePath("8-gpu-nvlink.yaml");
  std::string sys = dir.Join("sys");
};

// The agent's environment: the NVML stand-in, and with --cores the shim.
EnvOverrides StandInEnv(const Env& env) {
  EnvOverrides e;
  if (!g_real_nvml) {
    e = FakeNvmlEnv(env.fixture);
    e["FAKE_NVML_CONTROL"] = env.ctl;
  }
  if (g_cores > 0) {
    e["LD_PRELOAD"] = CORES_SHIM;
    e["BENCH_CORES"] = std::to_string(g_cores);
  }
  return e;
}

// The agent's command line: the stand-in's sysfs unless on a real driver.
std::vector<std::string> AgentArgs(const std::string& binary, const Env& env,
                                   const KubeletSimulator& sim) {
  std::vector<std::string> args = {binary,       "run",         "--kubelet-socket",
                                   sim.socket(), "--log-level", "warning"};
  if (!g_real_nvml) {
    args.push_back("--sysfs-root");
    args.push_back(env.sys);
  }
  return args;
}

bool ServesEveryGpu(const std::vector<v1beta1::Device>& d) { return d.size() == g_gpus; }

std::unique_ptr<Subprocess> StartAgent(Env& env, KubeletSimulator& sim,
                                       std::vector<std::string> extra = {}) {
  std::vector<std::string> args = AgentArgs(BinaryPath(), env, sim);
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<Subprocess>(args, StandInEnv(env));
}

// Start -> registered, over `runs` fresh processes.
std::vector<double> StartToRegistered(int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    Env env;
    if (!g_real_nvml) (void)WriteFixtureSysfs(env.fixture, env.sys);
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
  // Per thread: "<name>/<tid>" -> context switches so far.
  std::map<std::string, long> thread_switches;
};

ProcSample Sample(pid_t pid) {
  ProcSample s;
  s.ticks = CpuTicks(pid);
  // Context switches summed over every thread.
  s.thread_switches = ThreadSwitches(pid);
  for (const auto& [thread, n] : s.thread_switches) s.switches += n;
  return s;
}

std::string Fmt(double v, const char* unit, int precision = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", precision, v, unit);
  return buf;
}

// A copy of the agent's binary for one run, as a container image holds its
// own: its pages are the agent's alone (PSS), and, dropped from the page
// cache after the copy, they are charged to the agent's cgroup when it reads
// them, not to this process that wrote them. "" on failure.
std::string CopyBinaryForRun(const std::string& binary, const std::string& to) {
  std::error_code ec;
  std::filesystem::copy_file(binary, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return "";
  std::filesystem::permissions(to, std::filesystem::perms::owner_all, ec);
  const int fd = ::open(to.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return to;
}

// One idle agent, measured: registered with an open stream and nothing
// happening for the idle window, then after a burst of Allocates.
struct IdleRun {
  double wakeups = 0;  // context switches of all threads per second
  double cpu_pct = 0;
  double threads = 0;
  ProcessMemory idle, burst;
  long ws_idle_kib = -1, ws_burst_kib = -1;        // -1: no cgroup
  long usage_idle_kib = -1, usage_burst_kib = -1;  // the same
  int failed_allocates = 0;
  std::map<std::string, double> thread_wakeups;  // "<name>/<tid>" -> per second
};

// Where the working set was measured, or why not; set by the first run.
std::string g_cgroup_note;

std::optional<IdleRun> MeasureIdleOnce(Env& env, const std::string& binary, int idle_seconds,
                                       int allocates) {
  static int serial = 0;
  const std::string name =
      "gpu-agent-bench-" + std::to_string(::getpid()) + "-" + std::to_string(++serial);
  // In a folder of its own, so that the copy keeps the name (and the main
  // thread the comm) gpu-agent.
  const std::string folder = env.dir.Join(name);
  std::error_code ec;
  std::filesystem::create_directory(folder, ec);
  const std::string copy = CopyBinaryForRun(binary, folder + "/gpu-agent");
  if (copy.empty()) {
    std::fprintf(stderr, "could not copy %s\n", binary.c_str());
    return std::nullopt;
  }
  std::string why_not;
  // Made before the agent starts and removed after it has been waited for.
  std::unique_ptr<MemoryCgroup> cgroup = MemoryCgroup::Create(name, &why_not);
  g_cgroup_note = cgroup != nullptr
                      ? "the agent in a memory cgroup of its own (" + cgroup->kind() + ")"
                      : "n/a (no writable memory cgroup: " + why_not + ")";
  IdleRun run;
  {
    KubeletSimulator sim(env.dir.path());
    if (!sim.Start()) return std::nullopt;
    std::vector<std::string> args = AgentArgs(copy, env, sim);
    if (cgroup != nullptr) args = cgroup->Wrap(args);
    Subprocess agent(args, StandInEnv(env));
    if (!sim.WaitForDevices(kGpu, ServesEveryGpu)) {
      std::fprintf(stderr, "agent not serving:\n%s\n", agent.Stderr().c_str());
      return std::nullopt;
    }
    const ProcSample s0 = Sample(agent.pid());
    MeasurementWindow(std::chrono::seconds(idle_seconds));
    const ProcSample s1 = Sample(agent.pid());
    run.idle = ReadProcessMemory(agent.pid());
    if (cgroup != nullptr) {
      run.ws_idle_kib = cgroup->WorkingSetKib();
      run.usage_idle_kib = cgroup->UsageKib();
    }
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    run.cpu_pct = 100.0 * static_cast<double>(s1.ticks - s0.ticks) / hz / idle_seconds;
    run.wakeups = static_cast<double>(s1.switches - s0.switches) / idle_seconds;
    run.threads = static_cast<double>(s1.thread_switches.size());
    for (const auto& [thread, n] : s1.thread_switches) {
      auto before = s0.thread_switches.find(thread);
      const long d = n - (before == s0.thread_switches.end() ? 0 : before->second);
      run.thread_wakeups[thread] = static_cast<double>(d) / idle_seconds;
    }
    // A burst of work, then the figures again.
    auto stub = sim.Stub(kGpu);
    const std::vector<v1beta1::Device> devices = sim.Devices(kGpu);
    v1beta1::AllocateRequest alloc;
    alloc.add_container_requests()->add_devices_ids(
        devices.at(std::min<size_t>(2, devices.size() - 1)).id());
    for (int i = 0; i < allocates; ++i) {
      grpc::ClientContext ctx;
      v1beta1::AllocateResponse r;
      if (!stub->Allocate(&ctx, alloc, &r).ok()) ++run.failed_allocates;
    }
    run.burst = ReadProcessMemory(agent.pid());
    if (cgroup != nullptr) {
      run.ws_burst_kib = cgroup->WorkingSetKib();
      run.usage_burst_kib = cgroup->UsageKib();
    }
    agent.Signal(SIGTERM);
    agent.Wait();
  }
  std::filesystem::remove_all(folder, ec);
  return run;
}

// NaN: not measured; a median leaves those out.
constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
// Infinity: the Allocates of the burst did not all succeed.
constexpr double kFailed = std::numeric_limits<double>::infinity();

double Median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNotMeasured;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One figure of an idle run, its budget (or "-") and whether a value is in it.
struct IdleFigure {
  std::string name;
  std::function<double(const IdleRun&)> value;  // kNotMeasured, kFailed
  const char* unit;
  int precision;
  std::string budget;
  std::function<bool(double)> within;  // null: no budget, "info"
};

std::vector<IdleFigure> IdleFigures(int allocates) {
  const std::string after = "after " + std::to_string(allocates) + " Allocates: ";
  return {
      {"idle RssAnon", [](const IdleRun& r) { return Mib(r.idle.rss_anon_kib); }, "MiB", 2,
       "<= 1.8 MiB", [](double v) { return v <= 1.8; }},
      {"idle PSS", [](const IdleRun& r) { return Mib(r.idle.pss_kib); }, "MiB", 2, "-", nullptr},
      {"idle working set (cgroup usage - inactive file)",
       [](const IdleRun& r) { return Mib(r.ws_idle_kib); }, "MiB", 2, "-", nullptr},
      {"idle peak (VmHWM)", [](const IdleRun& r) { return Mib(r.idle.hwm_kib); }, "MiB", 2,
       kPeakBudget, [](double v) { return v <= kPeakBudgetMib; }},
      {after + "RssAnon", [](const IdleRun& r) { return Mib(r.burst.rss_anon_kib); }, "MiB", 2, "-",
       nullptr},
      {after + "PSS", [](const IdleRun& r) { return Mib(r.burst.pss_kib); }, "MiB", 2, "-",
       nullptr},
      {after + "working set", [](const IdleRun& r) { return Mib(r.ws_burst_kib); }, "MiB", 2, "-",
       nullptr},
      {after + "peak (VmHWM)", [](const IdleRun& r) { return Mib(r.burst.hwm_kib); }, "MiB", 2,
       kPeakBudget, [](double v) { return v <= kPeakBudgetMib; }},
      {"idle cgroup usage (page cache included)",
       [](const IdleRun& r) { return Mib(r.usage_idle_kib); }, "MiB", 2, "-", nullptr},
      {after + "cgroup usage", [](const IdleRun& r) { return Mib(r.usage_burst_kib); }, "MiB", 2,
       "-", nullptr},
      {"RssAnon growth " + after.substr(0, after.size() - 2),
       [](const IdleRun& r) {
         if (r.failed_allocates > 0) return kFailed;
         if (r.idle.rss_anon_kib < 0 || r.burst.rss_anon_kib < 0) return kNotMeasured;
         return static_cast<double>(r.burst.rss_anon_kib - r.idle.rss_anon_kib) / 1024.0;
       },
       "MiB", 2, "<= 0.1 MiB", [](double v) { return v <= 0.1; }},
      {"idle VmRSS (not a cost: counts shared and dropped file pages)",
       [](const IdleRun& r) { return Mib(r.idle.rss_kib); }, "MiB", 2, "-", nullptr},
      {after + "VmRSS", [](const IdleRun& r) { return Mib(r.burst.rss_kib); }, "MiB", 2, "-",
       nullptr},
      {"idle wake-ups (context switches, all threads) per second",
       [](const IdleRun& r) { return r.wakeups; }, "/s", 2, "<= 2 /s",
       [](double v) { return v <= 2.0; }},
      {"idle threads", [](const IdleRun& r) { return r.threads; }, "", 0, "<= 6",
       [](double v) { return v <= 6; }},
      {"idle CPU", [](const IdleRun& r) { return r.cpu_pct; }, "% of a core", 3, "< 0.1%",
       [](double v) { return v < 0.1; }},
  };
}

std::string FmtFigure(const IdleFigure& f, double v) {
  if (std::isinf(v)) return "(Allocates failed)";
  if (std::isnan(v)) {
    const bool cgroup = f.name.find("working set") != std::string::npos ||
                        f.name.find("cgroup") != std::string::npos;
    return cgroup ? "n/a (no writable memory cgroup)" : "n/a";
  }
  return Fmt(v, f.unit, f.precision);
}

// The idle figures of the binary under test, medians over `runs`, as rows.
template <typename Judge>
bool MeasureIdle(Env& env, int idle_seconds, int allocates, int runs, Judge judge,
                 std::vector<Row>* rows) {
  std::vector<IdleRun> done;
  for (int i = 0; i < runs; ++i) {
    std::optional<IdleRun> run = MeasureIdleOnce(env, BinaryPath(), idle_seconds, allocates);
    if (!run) return false;
    done.push_back(*run);
  }
  for (const IdleFigure& f : IdleFigures(allocates)) {
    std::vector<double> values;
    for (const IdleRun& r : done) values.push_back(f.value(r));
    const double m = Median(values);
    rows->push_back({f.name, FmtFigure(f, m), f.budget,
                     f.within ? judge(!std::isnan(m) && f.within(m)) : "info"});
  }
  std::printf("idle wake-ups per thread (%d s, %ld cores%s, last run):\n", idle_seconds,
              g_cores > 0 ? long{g_cores} : sysconf(_SC_NPROCESSORS_ONLN),
              g_cores > 0 ? " as the agent is told" : "");
  for (const auto& [thread, hz] : done.back().thread_wakeups) {
    std::printf("  %-28s %6.2f /s\n", thread.c_str(), hz);
  }
  return true;
}

// --binary LABEL=PATH, given more than once: the idle figures of each build,
// medians over `runs`, the builds taking turns (and turns at going first) in
// the same session, so a noisy machine weighs on each alike.
bool CompareIdle(Env& env, const std::vector<std::pair<std::string, std::string>>& binaries,
                 int idle_seconds, int allocates, int runs, std::string* table) {
  std::vector<std::vector<IdleRun>> done(binaries.size());
  for (int i = 0; i < runs; ++i) {
    for (size_t k = 0; k < binaries.size(); ++k) {
      const size_t b = (k + static_cast<size_t>(i)) % binaries.size();
      std::optional<IdleRun> run =
          MeasureIdleOnce(env, binaries[b].second, idle_seconds, allocates);
      if (!run) return false;
      done[b].push_back(*run);
      std::fprintf(stderr, "run %d/%d %s: idle RssAnon %.2f MiB\n", i + 1, runs,
                   binaries[b].first.c_str(), Mib(run->idle.rss_anon_kib));
    }
  }
  std::ostringstream out;
  out << "| figure |";
  for (const auto& [label, path] : binaries) out << " " << label << " |";
  out << " budget |\n|---|";
  for (size_t k = 0; k < binaries.size(); ++k) out << "---|";
  out << "---|\n";
  for (const IdleFigure& f : IdleFigures(allocates)) {
    out << "| " << f.name << " |";
    for (const std::vector<IdleRun>& runs_of : done) {
      std::vector<double> values;
      for (const IdleRun& r : runs_of) values.push_back(f.value(r));
      out << " " << FmtFigure(f, Median(values)) << " |";
    }
    out << " " << f.budget << " |\n";
  }
  out << "\nMedians of " << runs << " runs of each build, taking turns; " << idle_seconds
      << " s idle, then " << allocates << " Allocates; working set: " << g_cgroup_note << ".\n";
  *table = out.str();
  return true;
}

int Main(int argc, char** argv) {
  bool smoke = false;
  bool idle_only = false;
  int idle_seconds = 30;
  int runs = 1;
  int allocates = 100000;
  std::vector<std::pair<std::string, std::string>> binaries;  // --binary LABEL=PATH
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--smoke") == 0) smoke = true;
    if (std::strcmp(argv[i], "--idle-only") == 0) idle_only = true;
    if (std::strcmp(argv[i], "--real-nvml") == 0) g_real_nvml = true;
    if (std::strcmp(argv[i], "--gpus") == 0 && has_value) {
      g_gpus = static_cast<size_t>(std::max(1, std::atoi(argv[++i])));
    }
    if (std::strcmp(argv[i], "--cores") == 0 && has_value) g_cores = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--idle-seconds") == 0 && has_value)
      idle_seconds = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--runs") == 0 && has_value) runs = std::max(1, std::atoi(argv[++i]));
    if (std::strcmp(argv[i], "--allocates") == 0 && has_value) allocates = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--binary") == 0 && has_value) {
      const std::string spec = argv[++i];
      const size_t eq = spec.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--binary wants LABEL=PATH, got %s\n", spec.c_str());
        return 2;
      }
      binaries.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    }
    if (std::strcmp(argv[i], "--markdown") == 0 && has_value) markdown = argv[++i];
  }
  if (smoke) {
    idle_seconds = 1;
    allocates = 100;
  }
  const int rpcs = smoke ? 200 : 20000;
  const int xids = smoke ? 5 : 200;
  const int starts = smoke ? 2 : 20;
  std::vector<Row> rows;
  auto judge = [&](bool ok) { return smoke ? "info" : (ok ? "pass" : "FAIL"); };
  if (!binaries.empty()) {
    Env env;
    (void)WriteFixtureSysfs(env.fixture, env.sys);
    std::string table;
    if (!CompareIdle(env, binaries, idle_seconds, allocates, runs, &table)) return 1;
    std::printf("%s", table.c_str());
    if (!markdown.empty()) std::ofstream(markdown) << table;
    return 0;
  }
  if (idle_only || g_real_nvml) {
    if (g_real_nvml) {  // a real driver: start -> registered, then the idle figures
      auto ms = StartToRegistered(starts);
      if (ms.empty()) return 1;
      const double p50 = Percentile(ms, 50);
      rows.push_back({"start -> registered, p50", Fmt(p50, "ms"), "< 20 ms", judge(p50 < 20)});
    }
    Env env;
    if (!g_real_nvml) (void)WriteFixtureSysfs(env.fixture, env.sys);
    if (!MeasureIdle(env, idle_seconds, allocates, runs, judge, &rows)) return 1;
    for (const Row& r : rows) {
      std::printf("| %s | %s | %s | %s |\n", r.figure.c_str(), r.value.c_str(), r.budget.c_str(),
                  r.verdict.c_str());
    }
    std::printf("working set: %s\n", g_cgroup_note.c_str());
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
  if (!sim.WaitForDevices(kGpu, ServesEveryGpu)) {
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
  if (!MeasureIdle(env, idle_seconds, allocates, runs, judge, &rows)) return 1;

  // 5. Static mode against the API server stand-in: requests sent while
  // nothing changes, and how fast a zeroed capacity is repaired. Two
  // zeroings per agent process: a third within two minutes would be (rightly)
  // taken for a fight with another writer and no longer repaired at once.
  const int steady_seconds = smoke ? 1 : idle_seconds;
  const int drift_agents = smoke ? 2 : 25;
  std::vector<double> drift_ms;
  double steady_patches_per_hour = -1, steady_requests_per_hour = -1;
  ProcessMemory static_memory;  // after the steady window, the first agent
  double static_wakeups = std::numeric_limits<double>::quiet_NaN();  // the first agent's
  for (int run = 0; run < drift_agents; ++run) {
    ApiServerStub api;
    api.AddNode("bench-node");
    auto e = FakeNvmlEnv(env.fixture);
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
      static_wakeups = WakeupsPerSecond(sagent.pid(), std::chrono::seconds(steady_seconds));
      const double per_hour = 3600.0 / steady_seconds;
      steady_patches_per_hour = (api.patch_count() - p0) * per_hour;
      steady_requests_per_hour =
          (api.patch_count() - p0 + api.get_count() - g0 + api.watch_count() - w0) * per_hour;
      static_memory = ReadProcessMemory(sagent.pid());
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
  const double static_peak = Mib(static_memory.hwm_kib);
  rows.push_back({"static: peak (VmHWM) after the steady window",
                  std::isnan(static_peak) ? "n/a" : Fmt(static_peak, "MiB", 2), kPeakBudget,
                  judge(!std::isnan(static_peak) && static_peak <= kPeakBudgetMib)});
  rows.push_back({"static: idle wake-ups (context switches, all threads) per second",
                  std::isnan(static_wakeups) ? "n/a" : Fmt(static_wakeups, "/s", 2), "<= 2 /s",
                  judge(!std::isnan(static_wakeups) && static_wakeups <= 2.0)});
  rows.push_back({"static: RssAnon after the steady window",
                  std::isnan(Mib(static_memory.rss_anon_kib))
                      ? "n/a"
                      : Fmt(Mib(static_memory.rss_anon_kib), "MiB", 2),
                  "-", "info"});
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
        << xid_ms.size() << " XIDs, " << idle_seconds << " s idle then " << allocates
        << " Allocates (median of " << runs << " agents; working set: " << g_cgroup_note
        << "); static mode: " << steady_seconds << " s steady (counted per hour), "
        << drift_ms.size() << " zeroings over " << drift_agents << " agents.\n";
  std::printf("%s", table.str().c_str());
  if (!markdown.empty()) std::ofstream(markdown) << table.str();
  return 0;
}

}  // namespace
}  // namespace gpu_agent::testing

int main(int argc, char** argv) { return gpu_agent::testing::Main(argc, argv); }
