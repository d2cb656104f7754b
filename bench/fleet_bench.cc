// Static mode as a fleet: N agents, each its own process with its own Node,
// against one API server stand-in in this process. What the fleet costs the
// API server, from the stand-in's log of every request.
//   fleet_bench [--agents N] [--steady-seconds S] [--restart-seconds R] [--markdown FILE]
//               [--smoke]
// Two runs of the fleet:
//  1. Timers as shipped (watches of 10-20 min, a re-read every 15-45 min):
//     the start storm (every Node right, peak requests in one second), then
//     a stand-in restart (watch cache moved to the current revision, every
//     connection from before cut off) and the R seconds after it.
//  2. Timers 60 times shorter (--watch-timeout 10s --resync-interval 30s),
//     so one real minute stands for one hour: requests per node-hour in
//     steady state over S seconds, PATCHes, and the busiest simulated minute
//     (one real second) against the average one. Counts per period scale
//     with the timers; nothing else in the agent depends on them.
//  3. DRA mode's slice upkeep (--dra-only runs just this): one ResourceSlice
//     publisher per node in this process, each with its own connections as
//     each agent has, publishing one slice of two devices, with the watch
//     timeout 60 times shorter (10 s for 10 min): requests per node-hour by
//     verb in steady state over S seconds, and writes (goal 0).
// --smoke runs a tiny fleet briefly so CI keeps the bench running; it prints
// the table but judges nothing.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "apiserver/connection.h"
#include "base/log.h"
#include "dra/slice_publisher.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kGpu = "nvidia.com/gpu";

struct Row {
  std::string figure, value, goal, verdict;
};

std::string Fmt(double v, const char* unit, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s%s", digits, v, *unit ? " " : "", unit);
  return buf;
}

class Fleet {
 public:
  Fleet(int agents, std::vector<std::string> extra)
      : api_("", "", "", static_cast<size_t>(2 * agents + 32)) {
    // kube-apiserver sizes its watch cache to the cluster (1.19+); 100 events
    // would be outrun by the start storm itself.
    api_.SetWatchCacheSize(static_cast<size_t>(std::max(1000, 10 * agents)));
    for (int i = 0; i < agents; ++i) names_.push_back("node-" + std::to_string(i));
    for (const std::string& n : names_) api_.AddNode(n);
    start_ = Clock::now();
    for (const std::string& n : names_) {
      std::vector<std::string> args = {
          BinaryPath(),  "run",    "--mode", "static", "--node-name", n, "--proxy=" + api_.url(),
          "--log-level", "warning"};
      args.insert(args.end(), extra.begin(), extra.end());
      auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
      agents_.push_back(std::make_unique<Subprocess>(args, env));
    }
  }
  ~Fleet() {
    for (auto& a : agents_) a->Signal(SIGTERM);
    for (auto& a : agents_) a->Wait();
  }

  ApiServerStub& api() { return api_; }
  int size() const { return static_cast<int>(names_.size()); }
  Clock::time_point started() const { return start_; }

  bool AllRight() {
    for (const std::string& n : names_) {
      if (api_.Capacity(n, kGpu) != "1") return false;
    }
    return true;
  }
  // Every agent has opened a watch.
  bool AllWatching() {
    std::map<std::string, int> per;
    for (const auto& r : api_.requests()) {
      if (r.call == "watch nodes") ++per[r.node];
    }
    return static_cast<int>(per.size()) == size();
  }
  std::string SomeLog() { return agents_.empty() ? "" : agents_.front()->Stderr(); }

 private:
  ApiServerStub api_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Subprocess>> agents_;
  Clock::time_point start_;
};

// Requests in [from, to) grouped into buckets of `bucket`.
std::vector<int> Buckets(const std::vector<ApiServerStub::Request>& log, Clock::time_point from,
                         Clock::time_point to, std::chrono::milliseconds bucket) {
  const auto n = static_cast<size_t>((to - from) / bucket);
  std::vector<int> out(std::max<size_t>(n, 1), 0);
  for (const auto& r : log) {
    if (r.at < from || r.at >= to) continue;
    const auto i = static_cast<size_t>((r.at - from) / bucket);
    if (i < out.size()) ++out[i];
  }
  return out;
}

// One node's slice: two devices, as the agent builds it (fewer attributes).
dra::SliceBuilder OneSlice(const std::string& node) {
  return [node](const dra::SliceContext& c) {
    const std::string driver = "gpu.gpu-agent.github.io";
    return std::vector<std::string>{
        R"({"apiVersion":"resource.k8s.io/)" + c.api_version +
        R"(","kind":"ResourceSlice","metadata":{"name":")" + node + "-" + driver +
        R"(-0"},"spec":{"driver":")" + driver + R"(","nodeName":")" + node +
        R"(","pool":{"name":")" + node + R"(","generation":)" + std::to_string(c.generation) +
        R"(,"resourceSliceCount":1},"devices":[{"name":"gpu-0"},{"name":"gpu-1"}]}})"};
  };
}

struct SliceUpkeep {
  double start_seconds = 0, start_per_node = 0;
  double per_node_hour = 0, writes_per_node_hour = 0, minute_ratio = 0;
  std::map<std::string, int> by_call;
};

// Run 3: `nodes` slice publishers; false (with a line on stderr) when they
// never settle.
bool MeasureSliceUpkeep(int nodes, int steady_seconds, bool smoke, SliceUpkeep* out) {
  SetLogOptions(LogLevel::kWarning, LogFormat::kText);  // as the agents of runs 1 and 2
  ApiServerStub api("", "", "", static_cast<size_t>(2 * nodes + 32));
  api.ServeResourceVersions({"v1"});
  apiserver::ConnectionOptions options;
  options.proxy = api.url();
  absl::StatusOr<apiserver::Connection> conn = apiserver::ResolveConnection(
      options, [](const std::string&) { return std::optional<std::string>(); });
  if (!conn.ok()) {
    std::fprintf(stderr, "fleet_bench: %s\n", std::string(conn.status().message()).c_str());
    return false;
  }
  std::vector<std::unique_ptr<dra::SlicePublisher>> publishers;
  const auto start = Clock::now();
  for (int i = 0; i < nodes; ++i) {
    const std::string node = "node-" + std::to_string(i);
    api.AddNode(node);
    dra::SlicePublisherOptions o;
    o.api_version = "v1";
    o.driver = "gpu.gpu-agent.github.io";
    o.node = node;
    o.watch_timeout = std::chrono::seconds(10);  // 10 min, 60 times shorter
    absl::StatusOr<std::unique_ptr<dra::SlicePublisher>> p =
        dra::SlicePublisher::Start(*conn, apiserver::RestOptions{}, o, OneSlice(node));
    if (!p.ok()) {
      std::fprintf(stderr, "fleet_bench: %s\n", std::string(p.status().message()).c_str());
      return false;
    }
    publishers.push_back(*std::move(p));
  }
  auto settled = [&] {
    for (const auto& p : publishers) {
      if (!p->stats().in_sync || p->stats().watches == 0) return false;
    }
    return true;
  };
  if (!WaitFor(settled, std::chrono::seconds(120))) {
    std::fprintf(stderr, "fleet_bench: the slice publishers never settled\n");
    return false;
  }
  out->start_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out->start_per_node = static_cast<double>(api.requests().size()) / nodes;
  // As in run 2: the first watches, drawn at random, spread out (two cycles
  // and more of the longest).
  MeasurementWindow(std::chrono::seconds(smoke ? 1 : 45));
  const auto t0 = Clock::now();
  MeasurementWindow(std::chrono::seconds(steady_seconds));
  const auto t1 = Clock::now();
  int total = 0, writes = 0;
  const std::vector<ApiServerStub::Request> log = api.requests();
  for (const auto& r : log) {
    if (r.at < t0 || r.at >= t1) continue;
    ++total;
    ++out->by_call[r.call];
    writes += r.call == "create resourceslices" || r.call == "update resourceslices" ||
              r.call == "delete resourceslices";
  }
  const double node_hours = nodes * std::chrono::duration<double>(t1 - t0).count() / 60.0;
  out->per_node_hour = total / node_hours;
  out->writes_per_node_hour = writes / node_hours;
  const std::vector<int> minutes = Buckets(log, t0, t1, std::chrono::seconds(1));
  const double avg = static_cast<double>(total) / static_cast<double>(minutes.size());
  out->minute_ratio = avg > 0 ? *std::max_element(minutes.begin(), minutes.end()) / avg : 0;
  for (const auto& p : publishers) p->Stop();
  return true;
}

// Runs 1 and 2 (static mode), their rows added to `rows`; false (with a
// line on stderr) when the fleet never settles.
bool MeasureStaticFleet(int agents, int steady_seconds, int restart_seconds, bool smoke,
                        std::vector<Row>& rows) {
  auto verdict = [&](bool ok) { return smoke ? std::string("info") : ok ? "pass" : "FAIL"; };

  // 1. Timers as shipped: start storm, then a restart.
  double storm_seconds = 0, storm_peak = 0, storm_per_agent = 0;
  double restart_mean = 0, restart_burst = 0, restart_recovery = 0;
  int restart_max = 0, restart_patches = 0;
  {
    Fleet fleet(agents, {});
    if (!WaitFor([&] { return fleet.AllRight(); }, std::chrono::seconds(120))) {
      std::fprintf(stderr, "fleet_bench: the fleet never settled:\n%s\n", fleet.SomeLog().c_str());
      return false;
    }
    storm_seconds = std::chrono::duration<double>(Clock::now() - fleet.started()).count();
    if (!WaitFor([&] { return fleet.AllWatching(); }, std::chrono::seconds(60))) {
      std::fprintf(stderr, "fleet_bench: not every agent is watching\n");
      return false;
    }
    const auto storm_end = Clock::now();
    const auto storm_log = fleet.api().requests();
    const std::vector<int> per_s = Buckets(
        storm_log, fleet.started(), storm_end + std::chrono::seconds(1), std::chrono::seconds(1));
    storm_peak = *std::max_element(per_s.begin(), per_s.end());
    storm_per_agent = static_cast<double>(storm_log.size()) / agents;

    const auto t0 = Clock::now();
    fleet.api().Restart();
    MeasurementWindow(std::chrono::seconds(restart_seconds));
    const auto t1 = Clock::now();
    std::map<std::string, int> per_agent;
    Clock::time_point last = t0;
    for (const auto& r : fleet.api().requests()) {
      if (r.at < t0 || r.at >= t1) continue;
      ++per_agent[r.node];
      last = std::max(last, r.at);
      restart_patches += r.call == "patch nodes/status";
    }
    int total = 0;
    for (const auto& [n, c] : per_agent) {
      total += c;
      restart_max = std::max(restart_max, c);
    }
    restart_mean = static_cast<double>(total) / agents;
    // The recovery: from the restart to the last request it caused.
    restart_recovery = std::chrono::duration<double>(last - t0).count();
    const std::vector<int> rec = Buckets(fleet.api().requests(), t0, last + std::chrono::seconds(1),
                                         std::chrono::seconds(1));
    const double avg = static_cast<double>(total) / static_cast<double>(rec.size());
    restart_burst = avg > 0 ? *std::max_element(rec.begin(), rec.end()) / avg : 0;
    if (!fleet.AllRight()) {
      std::fprintf(stderr, "fleet_bench: a Node lost its value after the restart\n");
      return false;
    }
  }
  rows.push_back({"start storm: every Node right", Fmt(storm_seconds, "s"), "", "info"});
  rows.push_back({"start storm: requests per agent (LIST, PATCH, WATCH)", Fmt(storm_per_agent, ""),
                  "", "info"});
  rows.push_back(
      {"start storm: peak requests in one second", Fmt(storm_peak, "/s", 0), "", "info"});
  rows.push_back({"after a restart: requests per agent, mean / max",
                  Fmt(restart_mean, "") + " / " + std::to_string(restart_max), "<= 5",
                  verdict(restart_max <= 5)});
  rows.push_back({"after a restart: PATCH requests", std::to_string(restart_patches), "0",
                  verdict(restart_patches == 0)});
  rows.push_back({"after a restart: busiest second / average second of the recovery",
                  Fmt(restart_burst, "x", 2) + " (recovery " + Fmt(restart_recovery, "s") + ")",
                  "<= 2x", verdict(restart_burst <= 2.0)});

  // 2. Timers 60x shorter: steady state.
  double per_node_hour = 0, patches_per_node_hour = 0, minute_ratio = 0;
  std::map<std::string, int> by_call;
  {
    Fleet fleet(agents, {"--watch-timeout", "10s", "--resync-interval", "30s"});
    if (!WaitFor([&] { return fleet.AllRight() && fleet.AllWatching(); },
                 std::chrono::seconds(120))) {
      std::fprintf(stderr, "fleet_bench: the fleet never settled:\n%s\n", fleet.SomeLog().c_str());
      return false;
    }
    // Let the first watches and re-reads, drawn at random, spread out: one
    // full cycle of the longest timer.
    MeasurementWindow(std::chrono::seconds(smoke ? 1 : 45));
    const auto t0 = Clock::now();
    MeasurementWindow(std::chrono::seconds(steady_seconds));
    const auto t1 = Clock::now();
    int total = 0, patches = 0;
    for (const auto& r : fleet.api().requests()) {
      if (r.at < t0 || r.at >= t1) continue;
      ++total;
      ++by_call[r.call];
      patches += r.call == "patch nodes/status";
    }
    const double node_hours = agents * std::chrono::duration<double>(t1 - t0).count() / 60.0;
    per_node_hour = total / node_hours;
    patches_per_node_hour = patches / node_hours;
    const std::vector<int> minutes =
        Buckets(fleet.api().requests(), t0, t1, std::chrono::seconds(1));
    const double avg = static_cast<double>(total) / static_cast<double>(minutes.size());
    minute_ratio = avg > 0 ? *std::max_element(minutes.begin(), minutes.end()) / avg : 0;
  }
  std::string mix;
  for (const auto& [call, n] : by_call) {
    mix += (mix.empty() ? "" : ", ") + call + " " + std::to_string(n);
  }
  rows.push_back({"steady: requests per node-hour (" + mix + ")", Fmt(per_node_hour, "/h"), "<= 8",
                  verdict(per_node_hour <= 8)});
  rows.push_back({"steady: PATCH per node-hour", Fmt(patches_per_node_hour, "/h", 2), "0",
                  verdict(patches_per_node_hour == 0)});
  rows.push_back({"steady: busiest minute / average minute", Fmt(minute_ratio, "x", 2), "<= 2x",
                  verdict(minute_ratio <= 2.0)});
  const double per_1000_rps = per_node_hour * 1000 / 3600;
  rows.push_back({"steady: per 1,000 nodes",
                  Fmt(per_1000_rps, "requests/s", 2) +
                      "; 1,000 open watches (a connection each), and "
                      "a kept-alive connection per node while it sends",
                  "", "info"});
  return true;
}

int Main(int argc, char** argv) {
  int agents = 200, steady_seconds = 120, restart_seconds = 120;
  bool smoke = false, dra_only = false;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--agents") {
      agents = std::atoi(next().c_str());
    } else if (a == "--steady-seconds") {
      steady_seconds = std::atoi(next().c_str());
    } else if (a == "--restart-seconds") {
      restart_seconds = std::atoi(next().c_str());
    } else if (a == "--markdown") {
      markdown = next();
    } else if (a == "--smoke") {
      smoke = true;
    } else if (a == "--dra-only") {
      dra_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: fleet_bench [--agents N] [--steady-seconds S] [--restart-seconds R] "
                   "[--markdown FILE] [--smoke] [--dra-only]\n");
      return 2;
    }
  }
  if (smoke) agents = 4, steady_seconds = 5, restart_seconds = 12;
  if (agents < 1 || steady_seconds < 1 || restart_seconds < 1) {
    std::fprintf(stderr, "fleet_bench: counts must be positive\n");
    return 2;
  }
  std::vector<Row> rows;
  auto verdict = [&](bool ok) { return smoke ? std::string("info") : ok ? "pass" : "FAIL"; };

  if (!dra_only && !MeasureStaticFleet(agents, steady_seconds, restart_seconds, smoke, rows)) {
    return 1;
  }
  // 3. DRA mode's slice upkeep.
  SliceUpkeep dra;
  if (!MeasureSliceUpkeep(agents, steady_seconds, smoke, &dra)) return 1;
  std::string dra_mix;
  for (const auto& [call, n] : dra.by_call) {
    dra_mix += (dra_mix.empty() ? "" : ", ") + call + " " + std::to_string(n);
  }
  rows.push_back(
      {"DRA slices, start: every node's slice right", Fmt(dra.start_seconds, "s"), "", "info"});
  rows.push_back({"DRA slices, start: requests per node (GET Node, LIST, CREATE, WATCH)",
                  Fmt(dra.start_per_node, ""), "", "info"});
  rows.push_back({"DRA slices, steady: requests per node-hour (" + dra_mix + ")",
                  Fmt(dra.per_node_hour, "/h"), "<= 8", verdict(dra.per_node_hour <= 8)});
  rows.push_back({"DRA slices, steady: writes (create, update, delete) per node-hour",
                  Fmt(dra.writes_per_node_hour, "/h", 2), "0",
                  verdict(dra.writes_per_node_hour == 0)});
  rows.push_back({"DRA slices, steady: busiest minute / average minute",
                  Fmt(dra.minute_ratio, "x", 2), "<= 2x", verdict(dra.minute_ratio <= 2.0)});

  std::ostringstream md;
  md << "| figure | value | goal | result |\n|---|---|---|---|\n";
  for (const Row& r : rows) {
    md << "| " << r.figure << " | " << r.value << " | " << r.goal << " | " << r.verdict << " |\n";
  }
  md << "\nRuns: ";
  if (!dra_only) {
    md << agents << " agents (1-GPU fixture), each its own process and Node; " << restart_seconds
       << " s after the restart; " << steady_seconds
       << " s of steady state with timers 60x shorter (one real second is one minute). ";
  }
  md << "DRA slices: " << agents
     << " ResourceSlice publishers in one process, a node each with its own connections, one "
        "slice of two devices; "
     << steady_seconds << " s of steady state with the watch timeout 60x shorter.\n";
  std::printf("%s", md.str().c_str());
  if (!markdown.empty()) std::ofstream(markdown) << md.str();
  if (smoke) return 0;
  for (const Row& r : rows) {
    if (r.verdict == "FAIL") return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpu_agent::testing

int main(int argc, char** argv) { return gpu_agent::testing::Main(argc, argv); }
