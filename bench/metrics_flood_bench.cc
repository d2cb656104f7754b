// The real gpu-agent binary in plugin mode (NVML stand-in, kubelet
// simulator) with a hostile client on its metrics port, all at once for N
// seconds: connections sending header lines without end, a 100 GB body
// streamed in, 2,500 idle connections kept open (each one the agent closes
// is opened again), and 20 pipelined scrapes at a time. Meanwhile the
// agent's memory is sampled every 50 ms and /healthz is probed as the
// kubelet does (a new connection, Connection: close) every 250 ms. Prints
// the peak memory against the manifests' 128 Mi limit and the /healthz
// latency against the liveness probe's timeoutSeconds, and what the
// endpoint counted (gpu_agent_metrics_*).
//   metrics_flood_bench [--seconds N] [--idle N] [--smoke] [--markdown FILE] [--dra]
// --dra runs the agent in DRA mode instead, against an API server stand-in
// that is hostile too, at the same time (HostileApi below): discovery and
// claims nested 200,000 deep, slice watches whose line never ends, nested
// lines, drips, 410s and ends at once in turn, writes answered with bodies
// that never end, claims named to reach other paths; and the API server's
// busiest second is reported beside the memory.
// GPU_AGENT_BINARY=path measures another build of the agent.
// --smoke runs 2 s with 200 idle connections so CI keeps the bench
// compiling and running; it prints the table but judges nothing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api_server_stub.h"
#include "dra_kubelet.h"
#include "kubelet_simulator.h"
#include "memory_cgroup.h"
#include "process_memory.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The manifests' figures the results are judged against.
constexpr double kMemoryLimitMib = 128;    // resources.limits.memory
constexpr double kProbeTimeoutMs = 10000;  // livenessProbe.timeoutSeconds (plugin, DRA)

int Connect(int port, bool nonblocking = false) {
  return gpu_agent::testing::ConnectLoopback(port, nonblocking);
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until the server closes; what it sent.
std::string ReadToClose(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// One /healthz as the kubelet's prober sends it; latency in ms, or -1 when
// no 200 came.
double Probe(int port) {
  const auto t0 = Clock::now();
  const int fd = Connect(port);
  if (fd < 0) return -1;
  const bool sent = SendAll(fd,
                            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "User-Agent: kube-probe/1.34\r\nAccept: */*\r\n"
                            "Connection: close\r\n\r\n");
  const std::string answer = sent ? ReadToClose(fd) : "";
  ::close(fd);
  if (answer.rfind("HTTP/1.1 200 ", 0) != 0) return -1;
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Attack {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> header_bytes{0}, header_connections{0};
  std::atomic<uint64_t> body_bytes{0}, body_connections{0};
  std::atomic<uint64_t> idle_opened{0};
  std::atomic<uint64_t> pipelined_answers{0};
};

// Header lines of 8 KB without end, on one connection after another.
void EndlessHeaders(int port, Attack* a) {
  const std::string line = "X-Flood: " + std::string(8 * 1024, 'a') + "\r\n";
  while (!a->stop) {
    const int fd = Connect(port);
    if (fd < 0) continue;
    ++a->header_connections;
    if (SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n")) {
      while (!a->stop && SendAll(fd, line)) a->header_bytes += line.size();
    }
    ::close(fd);
  }
}

// A 100 GB body announced and streamed in, on one connection after another.
void HugeBody(int port, Attack* a) {
  const std::string chunk(64 * 1024, 'b');
  while (!a->stop) {
    const int fd = Connect(port);
    if (fd < 0) continue;
    ++a->body_connections;
    if (SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n")) {
      while (!a->stop && SendAll(fd, chunk)) a->body_bytes += chunk.size();
    }
    ::close(fd);
  }
}

// `count` connections that send nothing, each one the server closes opened
// again at once.
void IdleConnections(int port, size_t count, Attack* a) {
  std::vector<pollfd> fds;
  while (!a->stop && fds.size() < count) {
    const int fd = Connect(port, /*nonblocking=*/true);
    if (fd < 0) continue;
    ++a->idle_opened;
    fds.push_back({fd, POLLIN, 0});
  }
  while (!a->stop) {
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    for (pollfd& p : fds) {
      if (p.revents == 0) continue;
      ::close(p.fd);
      p.fd = Connect(port, /*nonblocking=*/true);
      p.revents = 0;
      if (p.fd >= 0) ++a->idle_opened;
    }
    fds.erase(std::remove_if(fds.begin(), fds.end(), [](const pollfd& p) { return p.fd < 0; }),
              fds.end());
    while (!a->stop && fds.size() < count) {
      const int fd = Connect(port, /*nonblocking=*/true);
      if (fd < 0) break;
      ++a->idle_opened;
      fds.push_back({fd, POLLIN, 0});
    }
  }
  for (const pollfd& p : fds) ::close(p.fd);
}

// 20 pipelined scrapes on a connection, read back, again and again.
void Pipelining(int port, Attack* a) {
  std::string twenty;
  for (int i = 0; i < 19; ++i) twenty += "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  twenty += "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  while (!a->stop) {
    const int fd = Connect(port);
    if (fd < 0) continue;
    if (SendAll(fd, twenty)) {
      const std::string answers = ReadToClose(fd);
      size_t at = 0, n = 0;
      while ((at = answers.find("HTTP/1.1 200 OK\r\n", at)) != std::string::npos) {
        ++n;
        ++at;
      }
      a->pipelined_answers += n;
    }
    ::close(fd);
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string Fmt(double v, const char* unit, int precision = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s%s", precision, v, *unit ? " " : "", unit);
  return buf;
}

// "name value" lines of the agent's own /metrics whose name starts with
// gpu_agent_metrics_.
std::map<std::string, double> EndpointCounters(int port) {
  std::map<std::string, double> out;
  const int fd = Connect(port);
  if (fd < 0) return out;
  SendAll(fd, "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  std::istringstream in(ReadToClose(fd));
  ::close(fd);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("gpu_agent_metrics_", 0) != 0) continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::atof(line.c_str() + sp + 1);
  }
  return out;
}

// The API server side of the --dra run: one attack after another on the
// slice watch (each phase ends the watch open, so the next one meets it),
// writes answered without end while the kubelet-like deletions make the
// agent write, and a kubelet stand-in asking to prepare hostile claims.
class HostileApi {
 public:
  static constexpr char kNode[] = "flood-node";
  static constexpr char kDriver[] = "gpu.gpu-agent.github.io";

  HostileApi() {
    api_.ServeResourceVersions({"v1"});
    api_.AddNode(kNode);
    deep_ = std::string(200000, '[') + std::string(200000, ']');
    // Discovery nested past every limit when the agent starts.
    api_.AnswerWith("get resource.k8s.io", deep_);
    api_.PutResourceClaim("team", "deep", deep_);
  }
  ApiServerStub& api() { return api_; }

  // Runs the attacks in turn until `stop`, each for `phase`.
  void Run(const std::atomic<bool>& stop, std::chrono::milliseconds phase,
           const std::string& registry_dir) {
    DraKubelet::Options o;
    o.registry_dir = registry_dir;
    DraKubelet kubelet(o);
    const bool kubelet_up = kubelet.Start() && kubelet.WaitForPlugin(kDriver);
    const std::string watch = "watch resourceslices";
    const std::string endless(64 << 10, 'x');
    const std::vector<std::function<void()>> attacks = {
        [&] { api_.AnswerWith(watch, endless, /*forever=*/true); },
        [&] { api_.AnswerWith(watch, deep_ + "\n", /*forever=*/true); },
        [&] {
          api_.AnswerWith(watch, R"({"type":"ERROR","object":{"kind":"Status","code":410}})"
                                 "\n");
        },
        [&] { api_.AnswerWith(watch, "", false); },
        [&] { api_.AnswerWith(watch, " ", /*forever=*/true, std::chrono::milliseconds(100)); },
        [&] {
          api_.AnswerNormally(watch);
          for (const char* w : {"create resourceslices", "update resourceslices"}) {
            api_.AnswerWith(w, endless, /*forever=*/true);
          }
        },
    };
    auto calm = [&] {
      for (const char* c :
           {"watch resourceslices", "create resourceslices", "update resourceslices"}) {
        api_.AnswerNormally(c);
      }
    };
    for (size_t i = 0; !stop; ++i) {
      if (i == 1) api_.AnswerNormally("get resource.k8s.io");  // the slices may go out
      calm();
      attacks[i % attacks.size()]();
      api_.ExpireSliceWatches();
      const auto until = Clock::now() + phase;
      while (!stop && Clock::now() < until) {
        // As a starting kubelet does: the slices go, so the agent writes.
        api_.DeleteNodeSlices(kNode);
        if (kubelet_up) {
          std::map<std::string, dra::PrepareOutcome> out;
          (void)kubelet.Prepare(kDriver,
                                {{"team", "uid-deep", "deep"},
                                 {"default/../../../api/v1/secrets?x=", "uid-path", "c"},
                                 {"team", "../../etc/passwd", "c"}},
                                &out);
          prepares_ += out.size();
          for (const auto& [uid, outcome] : out) refused_ += outcome.error.empty() ? 0 : 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));  // pacing
      }
    }
    calm();
  }
  // The most requests the server had in any one second since `from`.
  int BusiestSecond(Clock::time_point from) const {
    std::map<long, int> per_second;
    for (const ApiServerStub::Request& r : api_.requests()) {
      if (r.at < from) continue;
      ++per_second[std::chrono::duration_cast<std::chrono::seconds>(r.at - from).count()];
    }
    int most = 0;
    for (const auto& [s, n] : per_second) most = std::max(most, n);
    return most;
  }
  uint64_t prepares() const { return prepares_; }
  uint64_t refused() const { return refused_; }

 private:
  ApiServerStub api_;
  std::string deep_;
  std::atomic<uint64_t> prepares_{0}, refused_{0};
};

int Main(int argc, char** argv) {
  int seconds = 30;
  size_t idle = 2500;
  bool smoke = false;
  bool dra = false;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--smoke") == 0) smoke = true;
    if (std::strcmp(argv[i], "--dra") == 0) dra = true;
    if (std::strcmp(argv[i], "--seconds") == 0 && has_value) seconds = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--idle") == 0 && has_value) {
      idle = static_cast<size_t>(std::atoi(argv[++i]));
    }
    if (std::strcmp(argv[i], "--markdown") == 0 && has_value) markdown = argv[++i];
  }
  if (smoke) {
    seconds = 2;
    idle = 200;
  }
  ::signal(SIGPIPE, SIG_IGN);
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < idle + 200) {
    idle = rl.rlim_cur > 400 ? static_cast<size_t>(rl.rlim_cur) - 200 : 200;
    std::fprintf(stderr, "descriptor limit %llu: %zu idle connections\n",
                 static_cast<unsigned long long>(rl.rlim_cur), idle);
  }

  TempDir dir;
  const std::string fixture = FixturePath("8-gpu-nvlink.yaml");
  (void)WriteFixtureSysfs(fixture, dir.Join("sys"));
  KubeletSimulator sim(dir.path());
  if (!sim.Start()) return 1;
  EnvOverrides env = FakeNvmlEnv(fixture);
  env["FAKE_NVML_CONTROL"] = dir.Join("nvml.ctl");
  std::vector<std::string> args = {BinaryPath(),        "run",          "--kubelet-socket",
                                   sim.socket(),        "--sysfs-root", dir.Join("sys"),
                                   "--metrics-address", "127.0.0.1:0"};
  std::unique_ptr<HostileApi> hostile;
  if (dra) {
    hostile = std::make_unique<HostileApi>();
    (void)WriteFakeDriverRoot(dir.Join("driver"), "550.54.15");
    WriteFakeDevRoot(dir.Join("devroot"), {0, 1, 2, 3, 4, 5, 6, 7}, {}, false);
    ::mkdir(dir.Join("registry").c_str(), 0755);
    ::mkdir(dir.Join("plugins").c_str(), 0755);
    args = DraAgentArgs(dir, HostileApi::kNode, hostile->api().url());
    args.insert(args.end(), {"--sysfs-root", dir.Join("sys"), "--metrics-address", "127.0.0.1:0"});
  }
  std::string why_not;
  // Made before the agent starts and removed after it has been waited for.
  std::unique_ptr<MemoryCgroup> cgroup =
      MemoryCgroup::Create("gpu-agent-flood-" + std::to_string(::getpid()), &why_not);
  std::string cgroup_note = "n/a (no writable memory cgroup: " + why_not + ")";
  if (cgroup != nullptr) {
    cgroup_note = cgroup->kind();
    if (!cgroup->CountSockets()) cgroup_note += ", socket buffers not counted";
    args = cgroup->Wrap(args);
  }
  Subprocess agent(args, env);
  if (!dra && !sim.WaitForDevices("nvidia.com/gpu", [](const auto& d) { return d.size() == 8; })) {
    std::fprintf(stderr, "agent not serving:\n%s\n", agent.Stderr().c_str());
    return 1;
  }
  int port = -1;
  const std::regex listening("metrics endpoint listening address=127\\.0\\.0\\.1:([0-9]+)");
  WaitFor([&] {
    std::smatch m;
    const std::string err = agent.Stderr();
    if (!std::regex_search(err, m, listening)) return false;
    port = std::stoi(m[1].str());
    return true;
  });
  if (port <= 0) {
    std::fprintf(stderr, "no metrics port in the agent's log:\n%s\n", agent.Stderr().c_str());
    return 1;
  }

  // Before: the agent idle, probed as during the attack (every 250 ms).
  std::vector<double> before_ms;
  for (int i = 0; i < (smoke ? 4 : 20); ++i) {
    const double ms = Probe(port);
    if (ms >= 0) before_ms.push_back(ms);
    // Pacing, as the kubelet's period does; nothing waits on it.
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const ProcessMemory mem_before = ReadProcessMemory(agent.pid());
  const long ticks_before = CpuTicks(agent.pid());

  Attack attack;
  std::vector<std::thread> attackers;
  const auto api_from = Clock::now();
  std::atomic<bool> api_stop{false};
  std::thread api_attacker;
  if (hostile) {
    const auto phase = std::chrono::milliseconds(smoke ? 500 : std::max(2000, seconds * 1000 / 12));
    api_attacker = std::thread([&, phase] { hostile->Run(api_stop, phase, dir.Join("registry")); });
  }
  attackers.emplace_back(EndlessHeaders, port, &attack);
  attackers.emplace_back(EndlessHeaders, port, &attack);
  attackers.emplace_back(HugeBody, port, &attack);
  attackers.emplace_back(IdleConnections, port, idle, &attack);
  attackers.emplace_back(Pipelining, port, &attack);

  std::atomic<bool> sampling{true};
  std::mutex mu;
  long peak_anon_kib = 0, peak_ws_kib = -1, peak_sock_kib = -1;
  const long ws_before_kib = cgroup ? cgroup->WorkingSetKib() : -1;
  std::thread sampler([&] {
    while (sampling) {
      const ProcessMemory m = ReadProcessMemory(agent.pid());
      const long ws = cgroup ? cgroup->WorkingSetKib() : -1;
      const long sock = cgroup ? cgroup->SocketKib() : -1;
      {
        std::lock_guard<std::mutex> lock(mu);
        peak_anon_kib = std::max(peak_anon_kib, m.rss_anon_kib);
        peak_ws_kib = std::max(peak_ws_kib, ws);
        peak_sock_kib = std::max(peak_sock_kib, sock);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // pacing
    }
  });
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(seconds);
  std::vector<double> during_ms;
  int failed = 0;
  for (auto next = start; Clock::now() < end; next += std::chrono::milliseconds(250)) {
    std::this_thread::sleep_until(next);  // pacing
    const double ms = Probe(port);
    if (ms < 0 || ms > kProbeTimeoutMs) {
      ++failed;
    } else {
      during_ms.push_back(ms);
    }
  }
  const double attack_s = std::chrono::duration<double>(Clock::now() - start).count();
  const long ticks_after = CpuTicks(agent.pid());
  attack.stop = true;
  for (std::thread& t : attackers) t.join();
  api_stop = true;
  if (api_attacker.joinable()) api_attacker.join();
  sampling = false;
  sampler.join();
  const ProcessMemory mem_after = ReadProcessMemory(agent.pid());
  const std::map<std::string, double> counters = EndpointCounters(port);
  agent.Signal(SIGTERM);
  const int code = agent.Wait();

  const double hwm_mib = static_cast<double>(mem_after.hwm_kib) / 1024.0;
  const double peak_anon_mib = static_cast<double>(peak_anon_kib) / 1024.0;
  const double max_ms =
      during_ms.empty() ? 0 : *std::max_element(during_ms.begin(), during_ms.end());
  auto judge = [&](bool ok) { return smoke ? "info" : (ok ? "pass" : "FAIL"); };
  auto counter = [&](const std::string& name) {
    auto it = counters.find(name);
    return it == counters.end() ? std::string("?") : Fmt(it->second, "", 0);
  };
  std::ostringstream t;
  t << "| figure | value | budget | result |\n|---|---|---|---|\n";
  auto row = [&](const std::string& f, const std::string& v, const std::string& b,
                 const std::string& r) {
    t << "| " << f << " | " << v << " | " << b << " | " << r << " |\n";
  };
  row("RssAnon before the attack",
      Fmt(static_cast<double>(mem_before.rss_anon_kib) / 1024.0, "MiB", 2), "-", "info");
  row("RssAnon during the attack, peak of samples every 50 ms", Fmt(peak_anon_mib, "MiB", 2), "-",
      "info");
  row("RssAnon after the attack",
      Fmt(static_cast<double>(mem_after.rss_anon_kib) / 1024.0, "MiB", 2), "-", "info");
  row("peak resident set since start (VmHWM)", Fmt(hwm_mib, "MiB", 2),
      "< 128 MiB (resources.limits.memory)", judge(hwm_mib < kMemoryLimitMib));
  auto mib = [](long kib) {
    return kib < 0 ? std::string("n/a") : Fmt(static_cast<double>(kib) / 1024.0, "MiB", 2);
  };
  const bool v2 = cgroup && cgroup->kind() == "cgroup v2";
  // What a limit holds the cgroup to: v2 counts socket buffers in its usage,
  // v1 (its kmem.tcp counter apart) does not.
  const long charged_kib =
      peak_ws_kib < 0 ? -1 : peak_ws_kib + (v2 || peak_sock_kib < 0 ? 0 : peak_sock_kib);
  row("cgroup working set before the attack", mib(ws_before_kib), "-", "info");
  row("cgroup working set during the attack, peak of samples", mib(peak_ws_kib), "-", "info");
  row("kernel socket buffers charged to the cgroup, peak of samples", mib(peak_sock_kib), "-",
      "info");
  row("working set and socket buffers, peak", mib(charged_kib),
      "< 128 MiB (resources.limits.memory)",
      charged_kib < 0 ? "n/a" : judge(static_cast<double>(charged_kib) / 1024.0 < kMemoryLimitMib));
  row("/healthz before the attack, median", Fmt(Median(before_ms), "ms", 2), "-", "info");
  row("/healthz during the attack, median", Fmt(Median(during_ms), "ms", 2), "-", "info");
  row("/healthz during the attack, max", Fmt(max_ms, "ms", 2),
      "< 10000 ms (livenessProbe.timeoutSeconds)", judge(max_ms < kProbeTimeoutMs));
  row("/healthz probes without a 200 in time",
      Fmt(failed, "", 0) + " of " + std::to_string(failed + static_cast<int>(during_ms.size())),
      "0", judge(failed == 0));
  row("agent CPU during the attack",
      Fmt(100.0 * static_cast<double>(ticks_after - ticks_before) /
              static_cast<double>(sysconf(_SC_CLK_TCK)) / attack_s,
          "% of a core"),
      "-", "info");
  row("attack: header bytes sent (8 KB lines) on connections",
      Fmt(static_cast<double>(attack.header_bytes) / 1048576.0, "MiB") + " on " +
          std::to_string(attack.header_connections.load()),
      "-", "info");
  row("attack: body bytes sent (Content-Length 100 GB) on connections",
      Fmt(static_cast<double>(attack.body_bytes) / 1048576.0, "MiB") + " on " +
          std::to_string(attack.body_connections.load()),
      "-", "info");
  row("attack: idle connections held / opened in all",
      std::to_string(idle) + " / " + std::to_string(attack.idle_opened.load()), "-", "info");
  row("attack: pipelined scrapes answered (20 a connection)",
      std::to_string(attack.pipelined_answers.load()), "-", "info");
  row("endpoint: connections accepted / evicted / timed out",
      counter("gpu_agent_metrics_connections_accepted_total") + " / " +
          counter("gpu_agent_metrics_connections_evicted_total") + " / " +
          counter("gpu_agent_metrics_connections_timed_out_total"),
      "-", "info");
  row("endpoint: requests refused 431 / 413",
      counter("gpu_agent_metrics_requests_refused_total{code=\"431\"}") + " / " +
          counter("gpu_agent_metrics_requests_refused_total{code=\"413\"}"),
      "-", "info");
  if (hostile) {
    row("API server: requests in its busiest second",
        std::to_string(hostile->BusiestSecond(api_from)), "-", "info");
    row("API server: hostile answer bytes sent",
        Fmt(static_cast<double>(hostile->api().hostile_bytes_sent()) / 1048576.0, "MiB"), "-",
        "info");
    row("kubelet: hostile claims asked / refused, each its own error",
        std::to_string(hostile->prepares()) + " / " + std::to_string(hostile->refused()),
        "all refused", judge(hostile->prepares() == hostile->refused()));
  }
  row("agent exit after SIGTERM", std::to_string(code), "0", judge(code == 0));
  t << "\n"
    << seconds << " s of attack (all at once: 2 connections of endless headers, 1 of a "
    << "streamed body, " << idle << " idle connections, 1 of pipelined scrapes), /healthz probed "
    << "every 250 ms on a new connection; " << during_ms.size() + static_cast<size_t>(failed)
    << " probes; cgroup: " << cgroup_note << "."
    << (hostile ? " DRA mode, the API server hostile at the same time: discovery and a claim "
                  "nested 200,000 deep, then in turn on the slice watch a line that never ends, "
                  "lines nested 200,000 deep, a 410 on every watch, watches ended at once, a "
                  "drip of a byte every 100 ms, and creates and updates answered without end; "
                  "the slices deleted every 250 ms, and three hostile claims prepared as often."
                : "")
    << "\n";
  std::printf("%s", t.str().c_str());
  if (!markdown.empty()) std::ofstream(markdown) << t.str();
  return 0;
}

}  // namespace
}  // namespace gpu_agent::testing

int main(int argc, char** argv) { return gpu_agent::testing::Main(argc, argv); }
