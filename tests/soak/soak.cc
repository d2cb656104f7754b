// soak: both modes at once, the real gpu-agent binary, for N minutes, driven
// by a seeded random schedule of faults, with invariants checked as it goes:
//  - plugin mode against the kubelet simulator (1.25 profile) and the NVML
//    stand-in: 8 clients calling Allocate and GetPreferredAllocation without
//    pause; kubelet restarts, streams the kubelet drops, XIDs (recoverable
//    and reset-class, then resets), event-wait error bursts, SIGHUP with
//    alternating configs; the agent SIGKILLed and started again;
//  - static mode against the API server stand-in: 5xx and 429 on PATCH,
//    dropped GETs, 410 on watches, an API server restart, hung LISTs, error
//    events on watches, the kubelet zeroing the value, XIDs and resets,
//    token rotation, the Node deleted and re-created, etcd restored from a
//    backup, the agent SIGKILLed (mid-PATCH) and started again; every value
//    the agent PATCHes is one the GPUs called for.
// Every violation is printed with the seed and the step; a results table
// (requests, faults by kind, re-registration and convergence times, fd /
// threads / RSS drift) ends the run. Exit 0 only without violations.
//   soak [--minutes N] [--seed S] [--timing-advisory]
//     SOAK_LOG_DIR=dir keeps both agents' logs. --timing-advisory: a value
//     that comes right past its bound is reported, not failed (CI on a
//     shared runner); stuck values, crashes, sanitizer reports and drift
//     still fail.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api_server_stub.h"
#include "fixture.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Sends a control line to an agent's NVML stand-in. Its FIFO has a reader
// only once the agent's NVML is initialised: a line sent right after the
// agent was started again (the previous value already right, so the step
// before did not wait for the new process) would find none and be lost,
// and the schedule's model of which GPUs are out would part from the
// agent's. False when no reader came within 10 s.
bool SendToStandIn(const std::string& fifo, const std::string& line) {
  return WaitFor([&] { return WriteFifo(fifo, line); }, std::chrono::seconds(10));
}
constexpr const char* kGpu = "nvidia.com/gpu";
constexpr const char* kNode = "soak-node";

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// What the run saw; shared by the threads.
class Report {
 public:
  void Violation(const char* side, uint32_t seed, int step, const std::string& what) {
    Violation(side, seed, step, /*late=*/false, what);
  }
  // `late`: the value came right after all, past its bound (it stayed
  // wrong for 30 s more otherwise). Late ones are violations too, unless
  // the run was told timing is advisory (a shared, loaded CI runner).
  void Violation(const char* side, uint32_t seed, int step, bool late, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    (late ? late_ : violations_).push_back(StrFormat(side, seed, step, what));
    std::fprintf(stderr, "%s %s\n", late ? "LATE" : "VIOLATION",
                 (late ? late_ : violations_).back().c_str());
  }
  size_t late() {
    std::lock_guard<std::mutex> lock(mu_);
    return late_.size();
  }
  void Fault(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    ++faults_[kind];
  }
  void Time(const std::string& what, double ms) {
    std::lock_guard<std::mutex> lock(mu_);
    times_[what].push_back(ms);
  }
  std::atomic<uint64_t> allocate_ok{0}, allocate_invalid{0}, allocate_interrupted{0},
      preferred_ok{0};

  size_t violations() {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_.size();
  }
  void Print() {
    std::lock_guard<std::mutex> lock(mu_);
    std::printf("\n| figure | value |\n|---|---|\n");
    std::printf("| Allocate answered OK | %llu |\n",
                static_cast<unsigned long long>(allocate_ok.load()));
    std::printf("| Allocate answered INVALID_ARGUMENT (bad IDs asked on purpose) | %llu |\n",
                static_cast<unsigned long long>(allocate_invalid.load()));
    std::printf("| Allocate cut by a re-serve or kubelet restart | %llu |\n",
                static_cast<unsigned long long>(allocate_interrupted.load()));
    std::printf("| GetPreferredAllocation answered | %llu |\n",
                static_cast<unsigned long long>(preferred_ok.load()));
    for (const auto& [kind, n] : faults_) std::printf("| fault: %s | %d |\n", kind.c_str(), n);
    for (auto& [what, v] : times_) {
      std::sort(v.begin(), v.end());
      auto at = [&v](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size())))]; };
      std::printf("| %s p50 / p99 / max (ms), n=%zu | %.0f / %.0f / %.0f |\n", what.c_str(),
                  v.size(), at(0.5), at(0.99), v.back());
    }
    std::printf("| violations: late (right after all, past the bound) | %zu |\n", late_.size());
    std::printf("| violations: other (stuck, crashed, a sanitizer report, drift) | %zu |\n",
                violations_.size());
  }

 private:
  static std::string StrFormat(const char* side, uint32_t seed, int step, const std::string& w) {
    return std::string(side) + " seed " + std::to_string(seed) + " step " + std::to_string(step) +
           ": " + w;
  }
  std::mutex mu_;
  std::vector<std::string> violations_;
  std::vector<std::string> late_;
  std::map<std::string, int> faults_;
  std::map<std::string, std::vector<double>> times_;
};

// Stops every loop; waits that end early when it is set.
class Stop {
 public:
  void Set() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }
  bool IsSet() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  // Lets `d` pass unless stopped first: the schedule's pace, not a way to
  // wait for something. False once stopped.
  bool Pace(Clock::duration d) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, d, [this] { return stop_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

struct Usage {
  pid_t pid = 0;
  int fds = 0, threads = 0;
  long rss_kib = 0;
  double cpu_s = 0;
};

Usage Sample(pid_t pid) {
  Usage u;
  u.pid = pid;
  u.fds = CountOpenFds(pid);
  u.threads = CountThreads(pid);
  const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  if (size_t at = status.find("VmRSS:"); at != std::string::npos) {
    u.rss_kib = std::strtol(status.c_str() + at + 6, nullptr, 10);
  }
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (size_t close = stat.rfind(')'); close != std::string::npos) {
    // Fields after the command: state is 3, utime 14, stime 15.
    std::vector<std::string> f;
    size_t p = close + 2;
    while (p < stat.size()) {
      size_t sp = stat.find(' ', p);
      f.push_back(stat.substr(p, sp - p));
      if (sp == std::string::npos) break;
      p = sp + 1;
    }
    if (f.size() > 12) {
      u.cpu_s = (std::stod(f[11]) + std::stod(f[12])) / double(sysconf(_SC_CLK_TCK));
    }
  }
  return u;
}

// The end of a log, for a violation's report.
// The end of a log, for a violation's report, without the refusals the
// clients ask for on purpose.
std::string Tail(const std::string& log, size_t n = 4000) {
  std::string kept;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (line.find("GPU-no-such-device") == std::string::npos) kept += line + "\n";
    start = end + 1;
  }
  return kept.size() <= n ? kept : "..." + kept.substr(kept.size() - n);
}

// The agent's last log lines for a side's first violation only (one is
// enough to start from; SOAK_LOG_DIR keeps whole logs), else nothing.
std::string FirstTail(int* said, Subprocess& agent) {
  return (*said)++ ? "" : "; the agent's log ends:\n" + Tail(agent.Stderr());
}

bool SanitizerSaid(const std::string& err) {
  return err.find("ERROR: AddressSanitizer") != std::string::npos ||
         err.find("ERROR: LeakSanitizer") != std::string::npos ||
         err.find("runtime error:") != std::string::npos;
}

std::vector<std::string> Uuids(const std::string& fixture) {
  fake_nvml::Fixture fx;
  std::string error;
  if (!fake_nvml::LoadFixture(fixture, &fx, &error)) {
    std::fprintf(stderr, "soak: %s\n", error.c_str());
    std::exit(2);
  }
  std::vector<std::string> out;
  for (const auto& g : fx.gpus) out.push_back(g.uuid);
  return out;
}

// When the next SIGKILL may come: 45 s into the run, then every 8 to 12
// minutes, so each process lives long enough for its own drift to show.
class KillPace {
 public:
  explicit KillPace(std::mt19937* rng)
      : rng_(rng), next_(Clock::now() + std::chrono::seconds(45)) {}
  bool Due() {
    if (Clock::now() < next_ || (*rng_)() % 10 != 0) return false;
    next_ = Clock::now() + std::chrono::minutes(8) + std::chrono::seconds((*rng_)() % 240);
    return true;
  }

 private:
  std::mt19937* rng_;
  Clock::time_point next_;
};

// Every agent process a side ran: the one running last, and the ones killed.
class Agents {
 public:
  void Launch(std::vector<std::string> argv, std::map<std::string, std::string> env) {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_) past_.push_back(std::move(current_));
    current_ = std::make_unique<Subprocess>(std::move(argv), std::move(env));
    pid_ = current_->pid();
  }
  // REQUIRES: called from the side's schedule thread, or after it ended.
  Subprocess& current() { return *current_; }
  pid_t pid() const { return pid_.load(); }
  int launches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(past_.size()) + (current_ ? 1 : 0);
  }
  // Every process's log, oldest first, each under a header.
  std::string Logs() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    int n = 0;
    for (const auto& a : past_)
      out += "=== process " + std::to_string(++n) + " (SIGKILLed)\n" + a->Stderr();
    if (current_) out += "=== process " + std::to_string(++n) + "\n" + current_->Stderr();
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Subprocess>> past_;
  std::unique_ptr<Subprocess> current_;
  std::atomic<pid_t> pid_{0};
};

// ---------------------------------------------------------------- plugin

class PluginSide {
 public:
  PluginSide(uint32_t seed, Report* report, Stop* stop)
      : seed_(seed), report_(report), stop_(stop), sim_(dir_.path()), rng_(seed), kills_(&rng_) {}

  bool Start() {
    if (!WriteFixtureSysfs(FixturePath("8-gpu-nvlink.yaml"), dir_.Join("sys"))) return false;
    uuids_ = Uuids(FixturePath("8-gpu-nvlink.yaml"));
    WriteConfig();
    if (!sim_.Start()) return false;
    Launch();
    return sim_.WaitForAllocatable(kGpu, 8, std::chrono::seconds(20));
  }
  Agents& agents() { return agents_; }

  void RunClients(int n) {
    for (int i = 0; i < n; ++i) clients_.emplace_back([this, i] { Client(seed_ * 31 + i); });
  }
  void JoinClients() {
    for (auto& t : clients_) t.join();
  }

  void RunSchedule() {
    for (int step = 0; stop_->Pace(milliseconds(200 + rng_() % 800)); ++step) {
      if (!agent().Running() || SanitizerSaid(agent().Stderr())) {
        report_->Violation("plugin", seed_, step, "the agent exited or a sanitizer spoke");
        return;
      }
      if (kills_.Due()) {
        Kill(step);
      } else {
        Step(step);
      }
    }
  }

 private:
  Subprocess& agent() { return agents_.current(); }
  void Launch() {
    auto env = FakeNvmlEnv(FixturePath("8-gpu-nvlink.yaml"));
    env["FAKE_NVML_CONTROL"] = dir_.Join("nvml.ctl");
    agents_.Launch({BinaryPath(), "run", "--config", dir_.Join("c.yaml"), "--kubelet-socket",
                    sim_.socket(), "--sysfs-root", dir_.Join("sys"), "--health-recovery-period",
                    "500ms", "--stream-grace-period", "300ms"},
                   env);
  }
  // SIGKILL at whatever point the agent is (serving, registering,
  // reloading: the schedule's last step decides), then the same command
  // again. Its old socket is still in the plugin folder: the new process
  // must replace it and register. The NVML stand-in's state lives in the
  // agent's process, so the new one sees every GPU healthy, as a real
  // driver would after the GPUs were reset.
  void Kill(int step) {
    report_->Fault("plugin: agent SIGKILLed and started again");
    Disturbed();
    agent().Signal(SIGKILL);
    agent().Wait(std::chrono::seconds(5));
    out_.clear();
    const int before = sim_.registrations();
    const auto t0 = Clock::now();
    Launch();
    // Start to registered, under a loaded machine and ASan: 3 s.
    if (sim_.WaitForRegistrations(before + 1, std::chrono::seconds(3))) {
      report_->Time("plugin: registered after a SIGKILL and start", Ms(Clock::now() - t0));
    } else {
      const bool late = sim_.WaitForRegistrations(before + 1, std::chrono::seconds(30));
      report_->Violation(
          "plugin", seed_, step, late,
          "not registered within 3 s of starting again after a SIGKILL" + FirstLogTail());
    }
    ExpectAllocatable(step, "a SIGKILL and start", std::chrono::seconds(2));
  }
  int Replicas() const { return on_b_ ? 2 : 1; }
  // A GPU comes back when the health thread next looks: after the quiet
  // period (500 ms), within 3 s. After a burst of failed event waits (3 to
  // 6 here) the thread backs off 0.1 s doubling to 1 s, jittered: up to
  // 1.2 x (0.1 + 0.2 + 0.4 + 0.8 + 1 + 1) = 4.2 s in which it sees no XID
  // and probes nothing. The bounds add that while a burst is that recent.
  milliseconds HealthLimit(milliseconds base) const {
    const bool burst = Clock::now() - last_burst_ < std::chrono::seconds(5);
    return burst ? base + milliseconds(4200) : base;
  }
  milliseconds RecoveryLimit() const { return HealthLimit(milliseconds(3000)); }
  int Expected() const { return (8 - static_cast<int>(out_.size())) * Replicas(); }
  void WriteConfig() {
    dir_.Write("c.yaml", on_b_ ? "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: index\n"
                                 "sharing:\n  timeSlicing:\n    resources:\n"
                                 "    - name: nvidia.com/gpu\n      replicas: 2\n"
                               : "version: v1\n");
  }
  void Nvml(const std::string& cmd) {
    if (std::getenv("SOAK_VERBOSE") != nullptr)
      std::fprintf(stderr, "soak: plugin nvml: %s\n", cmd.c_str());
    if (!SendToStandIn(dir_.Join("nvml.ctl"), cmd)) {
      report_->Violation("plugin", seed_, -1, "the NVML stand-in took no \"" + cmd + "\" in 10 s");
    }
  }
  void Disturbed() { disturbed_ = Clock::now().time_since_epoch().count(); }
  std::string FirstLogTail() { return FirstTail(&said_, agent()); }

  // Waits (up to `limit`) for the kubelet's allocatable to be `want`. After
  // a violation it waits on (30 s more) so the next step starts from a
  // known state and one fault is reported once.
  void ExpectAllocatable(int step, const std::string& after, milliseconds limit) {
    const auto t0 = Clock::now();
    if (sim_.WaitForAllocatable(kGpu, Expected(), limit)) {
      report_->Time("plugin: allocatable right after " + after, Ms(Clock::now() - t0));
    } else {
      const int seen = sim_.Allocatable(kGpu);
      const bool late = sim_.WaitForAllocatable(kGpu, Expected(), std::chrono::seconds(30));
      report_->Violation("plugin", seed_, step, late,
                         after + ": allocatable " + std::to_string(seen) + ", want " +
                             std::to_string(Expected()) + " within " +
                             std::to_string(limit.count()) + " ms" + FirstLogTail());
    }
  }

  void Step(int step) {
    const int kind = static_cast<int>(rng_() % 100);
    if (kind < 20) {
      report_->Fault("plugin: kubelet restart");
      Disturbed();
      const int before = sim_.registrations();
      const auto t0 = Clock::now();
      sim_.Restart();
      if (sim_.WaitForRegistrations(before + 1, std::chrono::seconds(1))) {
        report_->Time("plugin: re-registration after a kubelet restart", Ms(Clock::now() - t0));
      } else {
        const bool late = sim_.WaitForRegistrations(before + 1, std::chrono::seconds(30));
        report_->Violation("plugin", seed_, step, late,
                           "not registered again within 1 s of a restart" + FirstLogTail());
      }
      ExpectAllocatable(step, "a kubelet restart", std::chrono::seconds(2));
    } else if (kind < 32) {
      report_->Fault("plugin: stream dropped by the kubelet");
      Disturbed();
      sim_.DisconnectCurrent(kGpu);
      ExpectAllocatable(step, "a dropped stream", std::chrono::seconds(2));
    } else if (kind < 50) {
      report_->Fault("plugin: SIGHUP (config switched)");
      Disturbed();
      on_b_ = !on_b_;
      WriteConfig();
      const int before = sim_.registrations();
      agent().Signal(SIGHUP);
      if (!sim_.WaitForRegistrations(before + 1, std::chrono::seconds(2))) {
        const bool late = sim_.WaitForRegistrations(before + 1, std::chrono::seconds(30));
        report_->Violation("plugin", seed_, step, late,
                           "not registered again within 2 s of SIGHUP" + FirstLogTail());
      }
      ExpectAllocatable(step, "a SIGHUP reload", std::chrono::seconds(2));
    } else if (kind < 65) {
      const size_t g = rng_() % uuids_.size();
      if (out_.count(static_cast<int>(g))) return;
      report_->Fault("plugin: XID 94 (recoverable)");
      Nvml("xid " + std::to_string(g) + " 94");
      // Out, then back after the quiet period (500 ms) once NVML answers.
      ExpectAllocatable(step, "a recoverable XID's quiet period", RecoveryLimit());
    } else if (kind < 77) {
      const int g = static_cast<int>(rng_() % uuids_.size());
      if (out_.count(g) || out_.size() >= 3) return;
      report_->Fault("plugin: XID 79 (off the bus)");
      out_.insert(g);
      Nvml("xid " + std::to_string(g) + " 79");
      ExpectAllocatable(step, "XID 79", HealthLimit(milliseconds(2000)));
    } else if (kind < 90) {
      if (out_.empty()) return;
      auto it = out_.begin();
      std::advance(it, rng_() % out_.size());
      const int g = *it;
      out_.erase(it);
      report_->Fault("plugin: GPU reset");
      Nvml("reset " + std::to_string(g));
      ExpectAllocatable(step, "a GPU reset", RecoveryLimit());
    } else {
      report_->Fault("plugin: event-wait error burst");
      last_burst_ = Clock::now();
      Nvml("wait-error 999 " + std::to_string(3 + rng_() % 4));
      ExpectAllocatable(step, "an event-wait error burst", std::chrono::seconds(2));
    }
  }

  void Client(uint32_t seed) {
    std::mt19937 rng(seed);
    while (!stop_->IsSet()) {
      const std::vector<v1beta1::Device> view = sim_.Devices(kGpu);
      std::vector<std::string> healthy;
      for (const auto& d : view) {
        if (d.health() == "Healthy") healthy.push_back(d.id());
      }
      if (healthy.empty()) {
        // Nothing to ask for right now: wait for the kubelet's view to fill.
        sim_.WaitForDevices(
            kGpu, [](const auto& d) { return !d.empty(); }, milliseconds(100));
        continue;
      }
      v1beta1::AllocateRequest req;
      auto* c = req.add_container_requests();
      const bool bad = rng() % 100 == 0;  // now and then, an ID no one has
      c->add_devices_ids(bad ? "GPU-no-such-device" : healthy[rng() % healthy.size()]);
      v1beta1::AllocateResponse resp;
      const Clock::rep before = disturbed_.load();
      grpc::Status s = sim_.Allocate(kGpu, req, &resp);
      if (s.ok()) {
        ++report_->allocate_ok;
      } else if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
        ++report_->allocate_invalid;  // a bad ID, or one that went unhealthy since the view
      } else if (s.error_code() == grpc::StatusCode::NOT_FOUND ||
                 s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                 s.error_code() == grpc::StatusCode::CANCELLED) {
        // No client (the kubelet restarting) or the connection re-served:
        // fine right after a disturbance, a violation in a quiet time.
        const Clock::rep quiet_for = Clock::now().time_since_epoch().count() - disturbed_.load();
        if (before == disturbed_.load() &&
            quiet_for > Clock::duration(std::chrono::seconds(3)).count()) {
          report_->Violation("plugin", seed_, -1,
                             "Allocate not answered with nothing going on: " + s.error_message());
        }
        ++report_->allocate_interrupted;
      } else {
        report_->Violation(
            "plugin", seed_, -1,
            "Allocate answered " + std::to_string(s.error_code()) + ": " + s.error_message());
      }
      v1beta1::PreferredAllocationRequest preq;
      auto* pc = preq.add_container_requests();
      for (const auto& id : healthy) pc->add_available_deviceids(id);
      pc->set_allocation_size(static_cast<int>(1 + rng() % std::min<size_t>(4, healthy.size())));
      v1beta1::PreferredAllocationResponse presp;
      if (sim_.GetPreferredAllocation(kGpu, preq, &presp).ok()) ++report_->preferred_ok;
    }
  }

  const uint32_t seed_;
  Report* const report_;
  Stop* const stop_;
  TempDir dir_;
  KubeletSimulator sim_;
  std::mt19937 rng_;
  KillPace kills_;
  Agents agents_;
  std::vector<std::string> uuids_;
  std::set<int> out_;  // GPUs off the bus, waiting for a reset
  int said_ = 0;       // violations reported (the first brings the log)
  bool on_b_ = false;
  std::atomic<Clock::rep> disturbed_{0};  // when a restart, drop or reload last came
  Clock::time_point last_burst_{};
  std::vector<std::thread> clients_;
};

// ---------------------------------------------------------------- static

class StaticSide {
 public:
  StaticSide(uint32_t seed, Report* report, Stop* stop)
      : seed_(seed), report_(report), stop_(stop), rng_(seed ^ 0x5eedu), kills_(&rng_) {}

  bool Start() {
    api_ = std::make_unique<ApiServerStub>();
    api_->AddNode(kNode);
    api_->AllowToken("token-0");
    dir_.Write("token", "token-0");
    uuids_ = Uuids(FixturePath("8-gpu-pcie.yaml"));
    Launch();
    allowed_.insert(Expected());
    const bool up =
        WaitFor([&] { return api_->Capacity(kNode, kGpu) == "8"; }, std::chrono::seconds(20));
    api_->TakeBackup();
    return up;
  }
  Agents& agents() { return agents_; }

  void RunSchedule() {
    for (int step = 0; stop_->Pace(milliseconds(300 + rng_() % 1000)); ++step) {
      if (!agent().Running() || SanitizerSaid(agent().Stderr())) {
        report_->Violation("static", seed_, step, "the agent exited or a sanitizer spoke");
        return;
      }
      if (kills_.Due()) {
        Kill(step);
      } else {
        Step(step);
      }
      CheckWrites(step);
    }
  }

 private:
  Subprocess& agent() { return agents_.current(); }
  std::string FirstLogTail() { return FirstTail(&said_, agent()); }
  void Launch() {
    auto env = FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml"));
    env["FAKE_NVML_CONTROL"] = dir_.Join("nvml.ctl");
    // Short watches and re-reads: more of the paths a fleet runs in an hour.
    agents_.Launch({BinaryPath(), "run", "--mode", "static", "--node-name", kNode, "--server",
                    api_->url(), "--token-file", dir_.Join("token"), "--health-recovery-period",
                    "500ms", "--watch-timeout", "2s", "--resync-interval", "5s"},
                   env);
  }
  std::string Expected() const { return std::to_string(8 - out_.size()); }
  void Nvml(const std::string& cmd) {
    if (!SendToStandIn(dir_.Join("nvml.ctl"), cmd)) {
      report_->Violation("static", seed_, -1, "the NVML stand-in took no \"" + cmd + "\" in 10 s");
    }
  }
  // The GPUs' state changes: the value the agent writes next may be the
  // old one (a PATCH already on its way) or the new one.
  void OutChanged() { allowed_.insert(Expected()); }

  // Every capacity value the agent PATCHed since the last look is one the
  // GPUs called for at some point since then: never a removal, a value
  // from nowhere, or one half-written by a process killed mid-request.
  void CheckWrites(int step) {
    const std::vector<std::string> bodies = api_->patch_bodies();
    const std::string key = "\"path\":\"/status/capacity/nvidia.com~1gpu\"";
    for (; checked_ < bodies.size(); ++checked_) {
      const std::string& b = bodies[checked_];
      for (size_t at = b.find(key); at != std::string::npos; at = b.find(key, at + 1)) {
        // The operation's object around the path: {"op":...,"path":...,"value":...}.
        const size_t open = b.rfind('{', at);
        const size_t close = b.find('}', at);
        const std::string op = b.substr(open, close - open + 1);
        if (op.find("\"op\":\"test\"") != std::string::npos) continue;
        const size_t v = op.find("\"value\":\"");
        const std::string value =
            v == std::string::npos ? "(none)" : op.substr(v + 9, op.find('"', v + 9) - v - 9);
        if (allowed_.count(value) == 0) {
          std::string want;
          for (const auto& a : allowed_) want += (want.empty() ? "" : ", ") + a;
          report_->Violation(
              "static", seed_, step,
              "the agent wrote capacity " + value + " (" + op + "); the GPUs called for " + want);
        }
      }
    }
    allowed_ = {Expected()};
  }

  // SIGKILL mid-PATCH: a GPU falls off the bus, the PATCH it causes is held
  // by the server, the agent is killed with it in flight, then the server
  // answers it (a server applies what it received) and the agent starts
  // again with the same command. The stand-in's state lives in the agent's
  // process: the new one sees every GPU healthy (8), as after resets.
  void Kill(int step) {
    report_->Fault("static: agent SIGKILLed mid-PATCH and started again");
    api_->HangPatches(true);
    Flip();
    const bool held = WaitFor([&] { return api_->held_patches() > 0; }, std::chrono::seconds(3));
    agent().Signal(SIGKILL);
    agent().Wait(std::chrono::seconds(5));
    api_->HangPatches(false);
    if (!held) report_->Fault("static: (the SIGKILL came before its PATCH)");
    out_.clear();
    OutChanged();
    Launch();
    // Start, discovery, LIST and PATCH on a loaded machine, under ASan: 4 s.
    Converge(step, "a SIGKILL and start", milliseconds(4000));
  }
  // What makes the agent send a PATCH through a fault: a GPU falls off the
  // bus or comes back from a reset. (The kubelet zeroing the value would do
  // too, but three of those within 2 minutes look like another writer, and
  // the agent rightly stops fighting: that has its own, rarer step.)
  void Flip() {
    if (!out_.empty() && (out_.size() >= 3 || rng_() % 2 == 0)) {
      auto it = out_.begin();
      std::advance(it, rng_() % out_.size());
      Nvml("reset " + std::to_string(*it));
      out_.erase(it);
      OutChanged();
    } else {
      int g = static_cast<int>(rng_() % uuids_.size());
      while (out_.count(g)) g = (g + 1) % static_cast<int>(uuids_.size());
      out_.insert(g);
      OutChanged();
      Nvml("xid " + std::to_string(g) + " 79");
    }
  }
  void Zero() { api_->KubeletSetsCapacity(kNode, kGpu, "0"); }

  // The Node's capacity is right within `limit` of the fault's end. After
  // a violation it waits on (30 s more), and failures a request did not
  // take are dropped, so the next step starts from a known state.
  void Converge(int step, const std::string& after, milliseconds limit) {
    const auto t0 = Clock::now();
    const bool ok = WaitFor([&] { return api_->Capacity(kNode, kGpu) == Expected(); }, limit);
    const std::string seen = api_->Capacity(kNode, kGpu).value_or("(none)");
    api_->ClearQueuedFailures();
    if (ok) {
      report_->Time("static: capacity right after " + after, Ms(Clock::now() - t0));
    } else {
      const bool late = WaitFor([&] { return api_->Capacity(kNode, kGpu) == Expected(); },
                                std::chrono::seconds(30));
      report_->Violation("static", seed_, step, late,
                         after + ": capacity " + seen + ", want " + Expected() + " within " +
                             std::to_string(limit.count()) + " ms" + FirstLogTail());
    }
  }

  void Step(int step) {
    if (rng_() % 20 == 0) api_->TakeBackup();  // etcd backed up now and then
    const int kind = static_cast<int>(rng_() % 100);
    if (kind < 15) {
      // The fault ends with the third failure; the reconciler's backoff
      // (0.5 s doubling, jittered up to 1.2x) puts the fourth try at most
      // 0.6 x (1 + 2 + 4) = 4.2 s after the first: 2 s on top of that.
      report_->Fault("static: PATCH answered 500 three times");
      api_->FailNextPatches(500, 3);
      Flip();
      Converge(step, "PATCH 500s", milliseconds(6200));
    } else if (kind < 27) {
      report_->Fault("static: PATCH answered 429 twice");
      api_->FailNextPatches(429, 2);
      Flip();
      Converge(step, "PATCH 429s", milliseconds(3800));
    } else if (kind < 39) {
      report_->Fault("static: GETs dropped mid-answer");
      api_->DropNextGets(2);
      api_->EndWatches(false);
      Flip();
      Converge(step, "dropped GETs", milliseconds(3000));
    } else if (kind < 51) {
      report_->Fault("static: watch answered 410 Gone");
      api_->EndWatches(true);
      Flip();
      Converge(step, "a 410", milliseconds(3000));
    } else if (kind < 58) {
      report_->Fault("static: API server restart");
      api_->Restart();
      Flip();
      Converge(step, "an API server restart", milliseconds(3000));
    } else if (kind < 64) {
      report_->Fault("static: LISTs hung for 2 s");
      api_->HangLists(true);
      api_->EndWatches(true);  // makes it list
      stop_->Pace(std::chrono::seconds(2));
      api_->HangLists(false);
      Flip();
      Converge(step, "hung LISTs", milliseconds(3000));
    } else if (kind < 71) {
      report_->Fault("static: watch ERROR event 500");
      api_->FailNextWatch(500);
      api_->EndWatches(false);
      Flip();
      Converge(step, "a watch error event", milliseconds(4000));
    } else if (kind < 74) {
      // The service-account token rotated: the file holds the new one and
      // the old one is refused from now on.
      report_->Fault("static: token rotated");
      ++token_;
      api_->AllowToken("token-" + std::to_string(token_));
      dir_.Write("token", "token-" + std::to_string(token_));
      api_->RevokeToken("token-" + std::to_string(token_ - 1));
      Flip();
      Converge(step, "a token rotation", milliseconds(3000));
    } else if (kind < 76) {
      // etcd restored from the last backup (the Node back at an older
      // content and version, older versions compacted, API servers
      // restarted). The agent sees it when its broken watch is opened
      // again, after the reconnect spread (up to 10 s, so a fleet does not
      // come back at once), is answered 410 and lists: 10 s + 2 s.
      report_->Fault("static: etcd restored from a backup");
      api_->RestoreBackup(1000 + rng_() % 1000);
      Converge(step, "an etcd restore", milliseconds(12000));
    } else if (kind < 78) {
      // The Node deleted and, a second later, registered again by its
      // kubelet (with no GPU capacity). The agent's PATCHes 404 meanwhile
      // and back off (0.5 s doubling): the bound allows for that.
      report_->Fault("static: the Node deleted and re-created");
      api_->DeleteNode(kNode);
      stop_->Pace(std::chrono::seconds(1));
      api_->AddNode(kNode);
      Converge(step, "the Node re-created", milliseconds(8000));
    } else if (kind < 80) {
      // At most two within the fight detector's 2 minutes.
      if (Clock::now() - last_zero_ < std::chrono::seconds(70)) return;
      last_zero_ = Clock::now();
      // Only the watch sees the kubelet's write. A watch still broken by an
      // earlier fault is opened again within the reconnect spread (10 s),
      // or, after several failed watches in a row (410s, drops, watches
      // that end at once), after the agent's backoff: 0.5 s doubling to
      // 30 s, +-20%, so that a fleet does not hammer a failing API server.
      // That fault has not ended until then: 36 s + 2 s.
      const auto t0 = Clock::now();
      if (WaitFor([&] { return api_->open_watches() > 0; }, std::chrono::seconds(38))) {
        report_->Time("static: a watch open again before the kubelet zeroing",
                      Ms(Clock::now() - t0));
      } else {
        report_->Violation("static", seed_, step, "no watch open 38 s after the last fault");
      }
      report_->Fault("static: the kubelet zeroes the value");
      Zero();
      Converge(step, "the kubelet zeroing", milliseconds(2000));
    } else {
      report_->Fault("static: a GPU falls off the bus or is reset");
      Flip();
      Converge(step, "a health change", milliseconds(3000));
    }
  }

  const uint32_t seed_;
  Report* const report_;
  Stop* const stop_;
  TempDir dir_;
  std::mt19937 rng_;
  KillPace kills_;
  std::unique_ptr<ApiServerStub> api_;
  Agents agents_;
  std::vector<std::string> uuids_;
  std::set<int> out_;
  std::set<std::string> allowed_;  // values the GPUs called for since the last CheckWrites
  size_t checked_ = 0;             // PATCH bodies CheckWrites has looked at
  int said_ = 0;                   // violations reported (the first brings the log)
  Clock::time_point last_zero_{};
  int token_ = 0;
};

// ---------------------------------------------------------------- main

struct Samples {
  std::vector<Usage> plugin, stat;
};

void PrintUsage(const Samples& s) {
  auto row = [](const char* who, const std::vector<Usage>& v) {
    if (v.empty()) return;
    const Usage& a = v.front();
    const Usage& b = v.back();
    std::printf("| %s fds first / last minute | %d / %d |\n", who, a.fds, b.fds);
    std::printf("| %s threads first / last minute | %d / %d |\n", who, a.threads, b.threads);
    std::printf("| %s VmRSS first / last minute (MiB) | %.1f / %.1f |\n", who, a.rss_kib / 1024.0,
                b.rss_kib / 1024.0);
    std::printf("| %s CPU seconds used by the last sample | %.1f |\n", who, b.cpu_s);
  };
  row("plugin agent", s.plugin);
  row("static agent", s.stat);
}

// A leak grows with every restart, reload or request: hundreds over an hour.
// gRPC's and httplib's pools grow and shrink lazily, so the first sample
// (after a minute of load) may sit a little below where they settle.
// A SIGKILL starts a new process: the trend is judged over the longest run
// of samples from one process.
void CheckDrift(const char* who, const std::vector<Usage>& all, uint32_t seed, Report* report) {
  size_t first = 0, n = 0;  // the longest run of one process's samples
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].pid == all[i].pid) ++j;
    if (j - i > n) first = i, n = j - i;
    i = j;
  }
  if (n < 3) return;                // too short to tell a trend
  const Usage& a = all[first + 1];  // after the process's first minute's warm-up
  const Usage& b = all[first + n - 1];
  std::printf("soak: %s judged on minutes %zu to %zu (one process)\n", who, first + 2, first + n);
  if (b.fds > a.fds + 16) {
    report->Violation(
        who, seed, -1,
        "fds grew " + std::to_string(a.fds) + " -> " + std::to_string(b.fds) + " (bound +16)");
  }
  if (b.threads > a.threads + 8) {
    report->Violation(who, seed, -1,
                      "threads grew " + std::to_string(a.threads) + " -> " +
                          std::to_string(b.threads) + " (bound +8)");
  }
  // Under AddressSanitizer freed memory waits in its quarantine (256 MiB by
  // default), so RSS climbs for reasons of its own; leaks are LeakSanitizer's
  // to report, at each agent's exit, and that fails the run.
#if !defined(__SANITIZE_ADDRESS__)
  constexpr bool kRssComparable = true;
#else
  constexpr bool kRssComparable = false;
#endif
  if (kRssComparable && b.rss_kib > a.rss_kib + 8 * 1024) {
    report->Violation(who, seed, -1,
                      "VmRSS grew " + std::to_string(a.rss_kib) + " -> " +
                          std::to_string(b.rss_kib) + " KiB (bound +8 MiB)");
  }
}

int Main(int argc, char** argv) {
  double minutes = 2;
  bool timing_advisory = false;
  uint32_t seed = static_cast<uint32_t>(std::time(nullptr));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--minutes" && i + 1 < argc) {
      minutes = std::atof(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (a == "--timing-advisory") {
      timing_advisory = true;
    } else {
      std::fprintf(stderr, "usage: soak [--minutes N] [--seed S] [--timing-advisory]\n");
      return 2;
    }
  }
  if (!(minutes > 0)) {
    std::fprintf(stderr, "soak: --minutes must be above 0\n");
    return 2;
  }
  std::printf("soak: %.1f minutes, seed %u (--seed %u repeats the schedule)\n", minutes, seed,
              seed);
  std::fflush(stdout);
  Report report;
  Stop stop;
  PluginSide plugin(seed, &report, &stop);
  StaticSide stat(seed, &report, &stop);
  if (!plugin.Start()) {
    std::fprintf(stderr, "soak: plugin mode did not come up\n%s", plugin.agents().Logs().c_str());
    return 2;
  }
  if (!stat.Start()) {
    std::fprintf(stderr, "soak: static mode did not come up\n%s", stat.agents().Logs().c_str());
    return 2;
  }
  Samples samples;
  std::thread sampler([&] {
    while (stop.Pace(std::chrono::seconds(60))) {
      samples.plugin.push_back(Sample(plugin.agents().pid()));
      samples.stat.push_back(Sample(stat.agents().pid()));
      std::printf(
          "soak: minute %zu: plugin fds %d threads %d RSS %ld KiB; static fds %d threads "
          "%d RSS %ld KiB; %llu Allocates\n",
          samples.plugin.size(), samples.plugin.back().fds, samples.plugin.back().threads,
          samples.plugin.back().rss_kib, samples.stat.back().fds, samples.stat.back().threads,
          samples.stat.back().rss_kib, static_cast<unsigned long long>(report.allocate_ok.load()));
      std::fflush(stdout);
    }
  });
  plugin.RunClients(8);
  std::thread plugin_schedule([&] { plugin.RunSchedule(); });
  std::thread static_schedule([&] { stat.RunSchedule(); });
  stop.Pace(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(minutes * 60)));
  stop.Set();
  plugin_schedule.join();
  static_schedule.join();
  plugin.JoinClients();
  sampler.join();
  for (Subprocess* a : {&plugin.agents().current(), &stat.agents().current()}) {
    a->Signal(SIGTERM);
    const int code = a->Wait(std::chrono::seconds(20));
    if (code != 0 || SanitizerSaid(a->Stderr())) {
      report.Violation(
          "exit", seed, -1,
          "an agent exited " + std::to_string(code) + " on SIGTERM; its log ends:\n" +
              a->Stderr().substr(a->Stderr().size() > 3000 ? a->Stderr().size() - 3000 : 0));
    }
  }
  if (const char* dir = std::getenv("SOAK_LOG_DIR"); dir != nullptr && *dir != '\0') {
    for (auto [name, a] :
         {std::pair{"plugin", &plugin.agents()}, std::pair{"static", &stat.agents()}}) {
      const std::string path =
          std::string(dir) + "/soak-" + std::to_string(seed) + "-" + name + ".log";
      if (FILE* f = std::fopen(path.c_str(), "w")) {
        const std::string log = a->Logs();
        std::fwrite(log.data(), 1, log.size(), f);
        std::fclose(f);
        std::printf("soak: %s agent's log: %s\n", name, path.c_str());
      }
    }
  }
  CheckDrift("plugin drift", samples.plugin, seed, &report);
  CheckDrift("static drift", samples.stat, seed, &report);
  report.Print();
  PrintUsage(samples);
  std::printf("| agent processes (each SIGKILL starts one more): plugin / static | %d / %d |\n",
              plugin.agents().launches(), stat.agents().launches());
  const bool failed = report.violations() > 0 || (!timing_advisory && report.late() > 0);
  if (timing_advisory && report.late() > 0) {
    std::printf("soak: %zu late values reported, not failed (--timing-advisory)\n", report.late());
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace gpu_agent::testing

int main(int argc, char** argv) { return gpu_agent::testing::Main(argc, argv); }
