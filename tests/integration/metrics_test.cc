// The /metrics, /healthz and /readyz endpoint of the real binary, scraped
// during plugin-mode and static-mode runs; every line is parsed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "api_server_stub.h"
#include "fixture.h"
#include "kubelet_simulator.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

using Devices = std::vector<v1beta1::Device>;

// Parses Prometheus text; fails the test on any line that is not a comment
// or a well-formed sample. Returns "name{labels}" -> value.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  static const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9.]+(e[-+]?[0-9]+)?|\+Inf|NaN)$)");
  std::map<std::string, double> out;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    if (line.rfind("#", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, comment)) << "bad comment line: " << line;
      continue;
    }
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, sample)) << "bad sample line: " << line;
    if (!m.empty()) out[line.substr(0, line.rfind(' '))] = std::stod(m[5].str());
  }
  EXPECT_GT(n, 5);
  return out;
}

// The port of the nth (from 1) metrics endpoint the agent started.
int PortFromLog(Subprocess& p, int nth = 1) {
  constexpr const char* kText = "metrics endpoint listening address=127.0.0.1:";
  int port = -1;
  WaitFor([&] {
    const std::string err = p.Stderr();
    size_t at = std::string::npos;
    for (int i = 0; i < nth; ++i) {
      at = err.find(kText, at == std::string::npos ? 0 : at + 1);
      if (at == std::string::npos) return false;
    }
    port = std::stoi(err.substr(at + std::strlen(kText)));
    return true;
  });
  return port;
}

std::map<std::string, std::string> Env(const std::string& fixture, const std::string& ctl) {
  auto e = FakeNvmlEnv(fixture);
  e["FAKE_NVML_CONTROL"] = ctl;
  return e;
}

// A driver container still installing the driver: the agent waits, alive
// but not ready, and registers once NVML can be loaded.
TEST(MetricsTest, WaitsForTheDriverAliveButNotReady) {
  TempDir dir, host;  // host: the driver root, empty until the "driver" lands
  KubeletSimulator sim(dir.path());
  ASSERT_TRUE(sim.Start());
  auto env = Env(FixturePath("8-gpu-nvlink.yaml"), dir.Join("ctl"));
  env["LD_LIBRARY_PATH"] = kUnset;
  Subprocess agent(
      {BinaryPath(), "run", "--kubelet-socket", sim.socket(), "--metrics-address", "127.0.0.1:0",
       "--nvidia-driver-root", host.path(), "--driver-wait-timeout", "10m"},
      env);
  ASSERT_TRUE(agent.WaitForStderr("waiting for the NVIDIA driver")) << agent.Stderr();
  const int port = PortFromLog(agent);
  ASSERT_GT(port, 0) << agent.Stderr();
  {
    httplib::Client http("127.0.0.1", port);
    auto ready = http.Get("/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 503);
    EXPECT_NE(ready->body.find("waiting for the NVIDIA driver"), std::string::npos) << ready->body;
    auto alive = http.Get("/healthz");
    ASSERT_TRUE(alive);
    EXPECT_EQ(alive->status, 200) << alive->body;
    EXPECT_NE(http.Get("/metrics")->body.find("gpu_agent_driver_wait_attempts_total"),
              std::string::npos);
  }
  EXPECT_EQ(sim.registrations(), 0);
  std::filesystem::create_directories(host.Join("usr/lib64"));
  std::filesystem::create_symlink(FakeNvmlDir() + "/libnvidia-ml.so.1",
                                  host.Join("usr/lib64/libnvidia-ml.so.1"));
  ASSERT_TRUE(agent.WaitForStderr("NVIDIA driver found")) << agent.Stderr();
  ASSERT_TRUE(sim.WaitForDevices("nvidia.com/gpu", [](const Devices& d) { return d.size() == 8; }))
      << agent.Stderr();
  const int port2 = PortFromLog(agent, 2);
  ASSERT_GT(port2, 0) << agent.Stderr();
  httplib::Client http("127.0.0.1", port2);
  ASSERT_TRUE(WaitFor([&] {
    auto r = http.Get("/readyz");
    return r && r->status == 200;
  })) << agent.Stderr();
}

TEST(MetricsTest, DriverWaitEndsOnSigtermOrGivesUpAsFailOnInitErrorSays) {
  TempDir dir, host;
  auto env = Env(FixturePath("8-gpu-nvlink.yaml"), dir.Join("ctl"));
  env["LD_LIBRARY_PATH"] = kUnset;
  {
    Subprocess agent({BinaryPath(), "run", "--kubelet-socket", dir.Join("kubelet.sock"),
                      "--nvidia-driver-root", host.path(), "--driver-wait-timeout", "10m"},
                     env);
    ASSERT_TRUE(agent.WaitForStderr("waiting for the NVIDIA driver")) << agent.Stderr();
    agent.Signal(SIGTERM);
    EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
    EXPECT_NE(agent.Stderr().find("stop asked while waiting for the NVIDIA driver"),
              std::string::npos);
  }
  {
    // A library that is not a usable NVML: waiting does not mend that.
    TempDir other;
    std::filesystem::create_directories(other.Join("usr/lib64"));
    std::filesystem::create_symlink(FakeNvmlDir() + "/../legacy-nvml/libnvidia-ml.so.1",
                                    other.Join("usr/lib64/libnvidia-ml.so.1"));
    Subprocess agent({BinaryPath(), "run", "--kubelet-socket", dir.Join("kubelet.sock"),
                      "--nvidia-driver-root", other.path(), "--driver-wait-timeout", "10m"},
                     env);
    EXPECT_EQ(agent.Wait(), 1) << agent.Stderr();
    EXPECT_NE(agent.Stderr().find("not waiting for the NVIDIA driver: waiting does not mend this"),
              std::string::npos)
        << agent.Stderr();
  }
  Subprocess agent({BinaryPath(), "run", "--kubelet-socket", dir.Join("kubelet.sock"),
                    "--nvidia-driver-root", host.path(), "--driver-wait-timeout", "1500ms"},
                   env);
  EXPECT_EQ(agent.Wait(), 1) << agent.Stderr();
  EXPECT_NE(agent.Stderr().find("gave up waiting for the NVIDIA driver"), std::string::npos);
  EXPECT_NE(agent.Stderr().find("exiting because failOnInitError is true"), std::string::npos)
      << agent.Stderr();
}

// Each GPU's standing on each polled check, its worst ("overall", XID
// outages included) and the quantity each check judged.
TEST(MetricsTest, GpuHealthPerCheck) {
  TempDir dir;
  KubeletSimulator sim(dir.path());
  ASSERT_TRUE(sim.Start());
  Subprocess agent({BinaryPath(), "run", "--kubelet-socket", sim.socket(), "--metrics-address",
                    "127.0.0.1:0", "--health-recovery-period", "0", "--health-poll-interval", "1s"},
                   Env(FixturePath("8-gpu-nvlink.yaml"), dir.Join("ctl")));
  const int port = PortFromLog(agent);
  ASSERT_GT(port, 0) << agent.Stderr();
  httplib::Client http("127.0.0.1", port);
  ASSERT_TRUE(sim.WaitForDevices("nvidia.com/gpu", [](const Devices& d) { return d.size() == 8; }));
  fake_nvml::Fixture fixture;
  std::string error;
  ASSERT_TRUE(fake_nvml::LoadFixture(FixturePath("8-gpu-nvlink.yaml"), &fixture, &error));
  std::vector<std::string> uuids;
  for (const auto& g : fixture.gpus) uuids.push_back(g.uuid);
  auto metric = [&](const std::string& name, const std::string& uuid, const std::string& check) {
    const std::string labels = check.empty() ? "{uuid=\"" + uuid + "\"}"
                                             : "{uuid=\"" + uuid + "\",check=\"" + check + "\"}";
    auto m = ParseMetrics(http.Get("/metrics")->body);
    auto it = m.find(name + labels);
    return it == m.end() ? -1.0 : it->second;
  };
  ASSERT_TRUE(WaitFor([&]() -> bool {
    return metric("gpu_agent_gpu_health", uuids[1], "overall") == 0;
  })) << http.Get("/metrics")->body;
  EXPECT_EQ(metric("gpu_agent_gpu_temperature_celsius", uuids[1], ""), 40);
  ASSERT_TRUE(WriteFifo(dir.Join("ctl"), "set 1 pcieWidth 8"));    // degraded
  ASSERT_TRUE(WriteFifo(dir.Join("ctl"), "set 2 nvlinksDown 0"));  // unhealthy
  ASSERT_TRUE(WriteFifo(dir.Join("ctl"), "xid 4 79"));             // out for an XID
  ASSERT_TRUE(WaitFor([&]() -> bool {
    return metric("gpu_agent_gpu_health", uuids[2], "nvlink") == 2;
  })) << http.Get("/metrics")->body;
  EXPECT_EQ(metric("gpu_agent_gpu_health", uuids[2], "overall"), 2);
  EXPECT_EQ(metric("gpu_agent_gpu_nvlinks_down", uuids[2], ""), 1);
  ASSERT_TRUE(WaitFor(
      [&]() -> bool { return metric("gpu_agent_gpu_health", uuids[1], "pcieWidth") == 1; }));
  EXPECT_EQ(metric("gpu_agent_gpu_health", uuids[1], "overall"), 1);
  EXPECT_EQ(metric("gpu_agent_gpu_pcie_link_width", uuids[1], ""), 8);
  ASSERT_TRUE(
      WaitFor([&]() -> bool { return metric("gpu_agent_gpu_health", uuids[4], "overall") == 2; }));
  EXPECT_EQ(metric("gpu_agent_gpu_health", uuids[0], "overall"), 0);
  auto m = ParseMetrics(http.Get("/metrics")->body);
  EXPECT_GE(m["gpu_agent_health_polls_total"], 1);
  EXPECT_LE(m["gpu_agent_health_poll_nvml_calls_total"], m["gpu_agent_health_polls_total"] * 80);
}

TEST(MetricsTest, PluginModeMetricsAndProbes) {
  TempDir dir;
  KubeletSimulator sim(dir.path());
  Subprocess agent({BinaryPath(), "run", "--kubelet-socket", sim.socket(), "--metrics-address",
                    "127.0.0.1:0", "--health-recovery-period", "0"},
                   Env(FixturePath("8-gpu-nvlink.yaml"), dir.Join("ctl")));
  const int port = PortFromLog(agent);
  ASSERT_GT(port, 0) << agent.Stderr();
  httplib::Client http("127.0.0.1", port);
  // Not registered yet: no kubelet.
  auto ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("not registered"), std::string::npos);
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  ASSERT_TRUE(sim.Start());
  ASSERT_TRUE(sim.WaitForDevices("nvidia.com/gpu", [](const Devices& d) { return d.size() == 8; }));
  ASSERT_TRUE(WaitFor([&] { return http.Get("/readyz")->status == 200; })) << agent.Stderr();
  // Alive: the health thread comes round and the gRPC server answers a call.
  auto alive = http.Get("/healthz");
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->status, 200) << alive->body;
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(sim.Devices("nvidia.com/gpu")[0].id());
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(sim.Allocate("nvidia.com/gpu", req, &resp).ok());
  ASSERT_TRUE(WriteFifo(dir.Join("ctl"), "xid 2 13"));
  ASSERT_TRUE(WriteFifo(dir.Join("ctl"), "xid 3 79"));
  ASSERT_TRUE(sim.WaitForDevices("nvidia.com/gpu",
                                 [](const Devices& d) { return d[3].health() == "Unhealthy"; }));
  auto m = ParseMetrics(http.Get("/metrics")->body);
  const std::string r = "resource=\"nvidia.com/gpu\"";
  EXPECT_EQ(m["gpu_agent_devices{" + r + ",health=\"healthy\"}"], 7);
  EXPECT_EQ(m["gpu_agent_devices{" + r + ",health=\"unhealthy\"}"], 1);
  EXPECT_EQ(m["gpu_agent_registered{" + r + "}"], 1);
  EXPECT_EQ(m["gpu_agent_registrations_total{" + r + "}"], 1);
  EXPECT_EQ(m["gpu_agent_allocate_requests_total{" + r + "}"], 1);
  EXPECT_EQ(m["gpu_agent_allocate_duration_seconds_count{" + r + "}"], 1);
  EXPECT_EQ(m["gpu_agent_allocate_duration_seconds_bucket{" + r + ",le=\"+Inf\"}"], 1);
  EXPECT_EQ(m["gpu_agent_xid_events_total{xid=\"79\"}"], 1);
  EXPECT_EQ(m["gpu_agent_xid_events_total{xid=\"13\"}"], 1);
  EXPECT_EQ(m["gpu_agent_build_info{version=\"0.1.0\",mode=\"plugin\"}"], 1);
  ASSERT_TRUE(sim.Restart());
  ASSERT_TRUE(sim.WaitForRegistrations(1));
  ASSERT_TRUE(WaitFor([&] {
    return ParseMetrics(http.Get("/metrics")->body)["gpu_agent_kubelet_restarts_total"] == 1;
  })) << agent.Stderr();
}

// /healthz follows the GPU health thread: while its NVML event wait hangs
// (a driver call that never returns), /healthz answers 503 naming the
// thread once the heartbeat bound (6 x health.eventWaitTimeout: four waits
// and the backoff cap of two) has passed, and 200 again once the wait
// returns.
TEST(MetricsTest, HealthzFailsWhileTheHealthThreadHangs) {
  TempDir dir;
  KubeletSimulator sim(dir.path());
  ASSERT_TRUE(sim.Start());
  const std::string ctl = dir.Join("ctl");
  Subprocess agent({BinaryPath(), "run", "--kubelet-socket", sim.socket(), "--metrics-address",
                    "127.0.0.1:0", "--health-event-wait-timeout", "100ms"},
                   Env(FixturePath("8-gpu-nvlink.yaml"), ctl));
  const int port = PortFromLog(agent);
  ASSERT_GT(port, 0) << agent.Stderr();
  httplib::Client http("127.0.0.1", port);
  std::string body;
  auto healthz_is = [&](int status) {
    auto r = http.Get("/healthz");
    if (!r || r->status != status) return false;
    body = r->body;
    return true;
  };
  ASSERT_TRUE(WaitFor([&] { return healthz_is(200); })) << body << agent.Stderr();
  ASSERT_TRUE(WriteFifo(ctl, "hang-wait"));
  const auto hung = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return healthz_is(503); }, std::chrono::seconds(5)))
      << body << agent.Stderr();
  // Not before the bound: 600 ms after the thread's last turn, which began
  // at most one wait (100 ms) before the hang.
  EXPECT_GE(std::chrono::steady_clock::now() - hung, std::chrono::milliseconds(450));
  EXPECT_NE(body.find("the GPU health thread has not come round its loop"), std::string::npos)
      << body;
  EXPECT_NE(body.find("bound 600 ms"), std::string::npos) << body;
  // An NVML call hung in the health thread stops nothing else: the kubelet's
  // calls are answered from what discovery read, and /metrics still renders.
  {
    ASSERT_TRUE(sim.WaitForAllocatable("nvidia.com/gpu", 8, std::chrono::seconds(5)));
    const auto devices = sim.Devices("nvidia.com/gpu");
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(devices.at(0).id());
    v1beta1::AllocateResponse resp;
    EXPECT_TRUE(sim.Allocate("nvidia.com/gpu", req, &resp).ok());
    v1beta1::PreferredAllocationRequest preq;
    auto* c = preq.add_container_requests();
    for (const auto& d : devices) c->add_available_deviceids(d.id());
    c->set_allocation_size(2);
    v1beta1::PreferredAllocationResponse presp;
    EXPECT_TRUE(sim.GetPreferredAllocation("nvidia.com/gpu", preq, &presp).ok());
    auto m = http.Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200);
  }
  ASSERT_TRUE(WriteFifo(ctl, "unhang-wait"));
  ASSERT_TRUE(WaitFor([&] { return healthz_is(200); }, std::chrono::seconds(5)))
      << body << agent.Stderr();
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
}

TEST(MetricsTest, ScrapesDuringShutdownAreHarmless) {
  TempDir dir;
  KubeletSimulator sim(dir.path());
  ASSERT_TRUE(sim.Start());
  Subprocess agent(
      {BinaryPath(), "run", "--kubelet-socket", sim.socket(), "--metrics-address", "127.0.0.1:0"},
      Env(FixturePath("8-gpu-nvlink.yaml"), dir.Join("ctl")));
  const int port = PortFromLog(agent);
  ASSERT_GT(port, 0);
  ASSERT_TRUE(sim.WaitForRegistrations(1));
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, malformed{0};
  std::thread scraper([&] {
    while (!stop) {
      httplib::Client http("127.0.0.1", port);
      http.set_read_timeout(2, 0);
      auto res = http.Get("/metrics");
      if (!res) continue;  // refused once the endpoint is gone: fine
      if (res->status == 200 && res->body.find("gpu_agent_build_info") != std::string::npos) {
        ++ok;
      } else {
        ++malformed;
      }
    }
  });
  ASSERT_TRUE(WaitFor([&] { return ok > 5; }));
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
  stop = true;
  scraper.join();
  EXPECT_EQ(malformed.load(), 0);
}

TEST(MetricsTest, StaticModeMetricsAndReadiness) {
  TempDir dir;
  ApiServerStub api;
  api.AddNode("gpu-node-1");
  api.FailNextPatches(500, 1);
  Subprocess agent({BinaryPath(), "run", "--mode", "static", "--node-name", "gpu-node-1",
                    "--proxy=" + api.url(), "--metrics-address", "127.0.0.1:0"},
                   Env(FixturePath("8-gpu-pcie.yaml"), dir.Join("ctl")));
  const int port = PortFromLog(agent);
  ASSERT_GT(port, 0) << agent.Stderr();
  httplib::Client http("127.0.0.1", port);
  ASSERT_TRUE(WaitFor([&] { return http.Get("/readyz")->status == 200; })) << agent.Stderr();
  auto m = ParseMetrics(http.Get("/metrics")->body);
  EXPECT_EQ(m["gpu_agent_static_desired{resource=\"nvidia.com/gpu\"}"], 8);
  EXPECT_EQ(m["gpu_agent_static_patches_total"], 2);  // one refused with 500, one applied
  EXPECT_EQ(m["gpu_agent_api_errors_total{code=\"500\"}"], 1);
  EXPECT_GT(m["gpu_agent_static_last_success_timestamp_seconds"], 1.7e9);
  api.KubeletSetsCapacity("gpu-node-1", "nvidia.com/gpu", "0");
  ASSERT_TRUE(WaitFor([&] {
    return ParseMetrics(http.Get("/metrics")->body)["gpu_agent_static_drift_repairs_total"] == 1;
  }));
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0);
}

// XIDs counted before a reload stay counted after it, in both modes: the
// mode skeleton keeps the counts of every health watcher a reload replaced.
TEST(MetricsTest, XidCountsSurviveAReloadInEveryMode) {
  for (const char* mode : {"plugin", "static"}) {
    SCOPED_TRACE(mode);
    TempDir dir;
    KubeletSimulator sim(dir.path());
    ASSERT_TRUE(sim.Start());
    ApiServerStub api;
    api.AddNode("gpu-node-1");
    Subprocess agent(
        {BinaryPath(), "run", "--mode", mode, "--node-name", "gpu-node-1", "--proxy=" + api.url(),
         "--kubelet-socket", sim.socket(), "--metrics-address", "127.0.0.1:0"},
        Env(FixturePath("8-gpu-pcie.yaml"), dir.Join("ctl")));
    const int port = PortFromLog(agent);
    ASSERT_GT(port, 0) << agent.Stderr();
    httplib::Client http("127.0.0.1", port);
    ASSERT_TRUE(WaitFor([&] { return http.Get("/readyz")->status == 200; })) << agent.Stderr();
    ASSERT_TRUE(WriteFifo(dir.Join("ctl"), "xid 2 13"));
    auto xid13 = [&] {
      return ParseMetrics(http.Get("/metrics")->body)["gpu_agent_xid_events_total{xid=\"13\"}"];
    };
    ASSERT_TRUE(WaitFor([&] { return xid13() == 1; })) << agent.Stderr();
    agent.Signal(SIGHUP);
    ASSERT_TRUE(agent.WaitForStderr("reload done")) << agent.Stderr();
    EXPECT_EQ(xid13(), 1);
    ASSERT_TRUE(WriteFifo(dir.Join("ctl"), "xid 4 13"));
    EXPECT_TRUE(WaitFor([&] { return xid13() == 2; })) << agent.Stderr();
    agent.Signal(SIGTERM);
    EXPECT_EQ(agent.Wait(), 0);
  }
}

TEST(MetricsTest, BadAddresses) {
  for (const char* bad : {"9400", "host:port", "127.0.0.1:99999", "[::1:9400"}) {
    RunResult r = RunAgent({"config", "--metrics-address", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("metrics.address \"" + std::string(bad) + "\""), std::string::npos)
        << r.err;
  }
  // A port someone else holds (a plain listening socket).
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  TempDir dir;
  KubeletSimulator sim(dir.path());
  ASSERT_TRUE(sim.Start());
  RunResult r = RunAgent({"run", "--kubelet-socket", sim.socket(), "--metrics-address",
                          "127.0.0.1:" + std::to_string(port)},
                         FakeNvmlEnv(FixturePath("1-gpu.yaml")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot listen"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.Join("nvidia-gpu.sock")));  // cleaned up
  ::close(holder);
}

// failOnInitError false and no NVML: as NVIDIA's plugin, no registration
// (the node's capacity is left alone), and /readyz and the log say why.
TEST(MetricsTest, NoNvmlWithFailOnInitErrorFalseWaitsWithoutRegistering) {
  TempDir dir;
  KubeletSimulator sim(dir.path());
  ASSERT_TRUE(sim.Start());
  const std::string fixture = dir.Write("f.yaml", "initError: 9\n");
  Subprocess agent({BinaryPath(), "run", "--kubelet-socket", sim.socket(), "--metrics-address",
                    "127.0.0.1:0", "--fail-on-init-error=false"},
                   Env(fixture, dir.Join("ctl")));
  ASSERT_TRUE(agent.WaitForStderr("waiting without registering any resource")) << agent.Stderr();
  EXPECT_NE(agent.Stderr().find("Driver Not Loaded"), std::string::npos) << agent.Stderr();
  const int port = PortFromLog(agent);
  ASSERT_GT(port, 0) << agent.Stderr();
  httplib::Client http("127.0.0.1", port);
  auto ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("failOnInitError is false: waiting without registering"),
            std::string::npos)
      << ready->body;
  auto alive = http.Get("/healthz");
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->status, 200) << alive->body;
  // The wait is entered before anything could register.
  EXPECT_EQ(sim.registrations(), 0);
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0) << agent.Stderr();
}

}  // namespace
}  // namespace gpu_agent::testing
