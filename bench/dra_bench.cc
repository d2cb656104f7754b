// DRA mode's costs, the real binary against the DRA kubelet stand-in and the
// API server stand-in (8 GPUs, the NVML stand-in):
//  - prepare round trip for 1 claim and for a batch of 8, each as a ratio to
//    an empty NodeUnprepareResources on the same socket, interleaved call by
//    call; the claim GET (one GET of a claim from this process to the same
//    stand-in) is reported on its own, and the 1-claim ratio is judged with
//    it taken out; so is one checkpoint write (a 1.5 KB record written in
//    place and flushed, as the agent writes its checkpoint, in the folder
//    it writes to), the least a prepare that keeps its durability contract
//    adds, and the same record written the plain way (temporary file,
//    fsync, rename, folder fsync), against which the slots must save at
//    least 20 % of a 1-claim prepare to be worth keeping;
//  - ResourceSlices published after discovery: from the agent's GET of
//    /apis/resource.k8s.io to its first slice create, from the stand-in's
//    log.
//  - the idle agent's wake-ups over 10 s, registered and published; its
//    peak (VmHWM) and RssAnon after the calls; the peak and wake-ups judged
//    against the budgets every mode shares (15 MiB, 2 a second).
//   dra_bench [--calls N] [--markdown FILE] [--smoke]
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "apiserver/connection.h"
#include "apiserver/rest_client.h"
#include "base/file_util.h"
#include "base/slotted_file.h"
#include "dra_kubelet.h"
#include "process_memory.h"
#include "support/agent_env.h"
#include "support/proxy_connection.h"

namespace gpu_agent::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kDriver[] = "gpu.gpu-agent.github.io";
constexpr char kNode[] = "node-a";

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The 8-gpu-pcie fixture's GPUs, named after their PCI addresses.
constexpr const char* kDevices[] = {"gpu-0000-1b-00-0", "gpu-0000-1c-00-0", "gpu-0000-3d-00-0",
                                    "gpu-0000-3e-00-0", "gpu-0000-88-00-0", "gpu-0000-89-00-0",
                                    "gpu-0000-b1-00-0", "gpu-0000-b2-00-0"};

std::string Claim(int i) {
  return std::string(R"({"metadata":{"name":"c)") + std::to_string(i) +
         R"(","namespace":"ns","uid":"u)" + std::to_string(i) +
         R"("},"spec":{"devices":{"requests":[{"name":"gpu"}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":")" +
         kDriver + R"(","pool":")" + kNode + R"(","device":")" + kDevices[i] + R"("}]}}}})";
}

int Main(int argc, char** argv) {
  int calls = 200;
  std::string markdown;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--markdown") && i + 1 < argc)
      markdown = argv[++i];
    else if (!std::strcmp(argv[i], "--smoke"))
      smoke = true;
    else {
      std::fprintf(stderr, "usage: dra_bench [--calls N] [--markdown FILE] [--smoke]\n");
      return 2;
    }
  }
  if (smoke) calls = 5;
  TempDir dir;
  if (!WriteFakeDriverRoot(dir.Join("driver"), "550.54.15")) return 1;
  WriteFakeDevRoot(dir.Join("devroot"), {0, 1, 2, 3, 4, 5, 6, 7}, {}, false);
  ::mkdir(dir.Join("registry").c_str(), 0755);
  ::mkdir(dir.Join("plugins").c_str(), 0755);
  ApiServerStub api;
  api.AddNode(kNode);
  api.ServeResourceVersions({"v1"});
  for (int i = 0; i < 8; ++i) api.PutResourceClaim("ns", "c" + std::to_string(i), Claim(i));
  DraKubelet::Options ko;
  ko.registry_dir = dir.Join("registry");
  DraKubelet kubelet(ko);
  if (!kubelet.Start()) return 1;
  std::vector<std::string> args = DraAgentArgs(dir, kNode, api.url());
  args.insert(args.end(), {"--log-level", "warning"});
  Subprocess agent(args, FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml")));
  if (!kubelet.WaitForPlugin(kDriver, std::chrono::seconds(30)) ||
      !WaitFor([&] { return !api.Slices(kNode).empty(); }, std::chrono::seconds(30))) {
    std::fprintf(stderr, "dra_bench: the agent did not register or publish:\n%s\n",
                 agent.Stderr().c_str());
    return 1;
  }
  // Idle: registered and published, nothing asked of it.
  std::map<std::string, double> thread_wakeups;
  const double idle_wakeups =
      WakeupsPerSecond(agent.pid(), std::chrono::seconds(smoke ? 1 : 10), &thread_wakeups);
  std::printf("idle wake-ups per thread:\n");
  for (const auto& [thread, hz] : thread_wakeups)
    std::printf("  %-28s %6.2f /s\n", thread.c_str(), hz);
  // Slices after discovery, from the stand-in's log.
  Clock::time_point discovery{}, first_create{};
  for (const auto& r : api.requests()) {
    if (r.call == "get resource.k8s.io" && discovery == Clock::time_point{}) discovery = r.at;
    if (r.call == "create resourceslices" && first_create == Clock::time_point{}) {
      first_create = r.at;
    }
  }
  const double slices_ms = Us(first_create - discovery) / 1000.0;

  // The claim GET on its own: this process to the same stand-in.
  absl::StatusOr<apiserver::Connection> conn = ProxyConnection(api.url());
  if (!conn.ok()) return 1;
  auto rest = apiserver::RestClient::Create(*conn, apiserver::RestOptions{});
  if (!rest.ok()) return 1;

  // One checkpoint write by itself, as the agent makes it (base/slotted_file:
  // in place, fdatasync): the same folder, the size of a small checkpoint.
  SlottedWriter sync_probe(dir.Join("plugins/flush-probe.json"));
  const std::string sync_content(1500, 'x');
  if (!sync_probe.Write(sync_content).ok()) return 1;  // the file made once
  // And the plain way, for comparison: a temporary file written, fsynced,
  // renamed over the old one, the folder fsynced (base/file_util).
  const std::string plain_probe = dir.Join("plugins/plain-probe.json");

  std::vector<double> floor_us, one_us, batch_us, get_us, flush_us, plain_us;
  std::vector<dra::ClaimRef> batch;
  for (int i = 0; i < 8; ++i) {
    batch.push_back({"ns", "u" + std::to_string(i), "c" + std::to_string(i)});
  }
  int errors = 0;
  for (int n = 0; n < calls; ++n) {
    std::map<std::string, std::string> un;
    auto t0 = Clock::now();
    if (!kubelet.Unprepare(kDriver, {}, &un).ok()) ++errors;
    floor_us.push_back(Us(Clock::now() - t0));

    std::map<std::string, dra::PrepareOutcome> out;
    t0 = Clock::now();
    if (!kubelet.Prepare(kDriver, {batch[0]}, &out).ok() || !out["u0"].error.empty()) ++errors;
    one_us.push_back(Us(Clock::now() - t0));
    kubelet.Unprepare(kDriver, {batch[0]}, &un);

    t0 = Clock::now();
    if (!(*rest)->Get("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c0").ok()) ++errors;
    get_us.push_back(Us(Clock::now() - t0));

    t0 = Clock::now();
    if (!sync_probe.Write(sync_content).ok()) ++errors;
    flush_us.push_back(Us(Clock::now() - t0));

    t0 = Clock::now();
    if (!WriteFileAtomically(plain_probe, sync_content, Durability::kFlushed).ok()) ++errors;
    plain_us.push_back(Us(Clock::now() - t0));

    out.clear();
    t0 = Clock::now();
    if (!kubelet.Prepare(kDriver, batch, &out).ok()) ++errors;
    batch_us.push_back(Us(Clock::now() - t0));
    kubelet.Unprepare(kDriver, batch, &un);
  }
  // A batch whose claim GETs are each answered 2 ms late, as by an API
  // server a network away: eight read one after another take 16 ms or more.
  constexpr auto kLate = std::chrono::milliseconds(2);
  api.DelayClaimGets(kLate);
  std::vector<double> late_us;
  for (int n = 0; n < std::max(3, calls / 10); ++n) {
    std::map<std::string, dra::PrepareOutcome> out;
    std::map<std::string, std::string> un;
    const auto t0 = Clock::now();
    if (!kubelet.Prepare(kDriver, batch, &out).ok()) ++errors;
    late_us.push_back(Us(Clock::now() - t0));
    kubelet.Unprepare(kDriver, batch, &un);
  }
  // What the agent holds after the calls: its peak (against the budget
  // every mode shares) and its private pages.
  const ProcessMemory memory = ReadProcessMemory(agent.pid());
  agent.Signal(SIGTERM);
  agent.Wait();
  const double peak_mib = Mib(memory.hwm_kib), anon_mib = Mib(memory.rss_anon_kib);
  const double floor = Median(floor_us), one = Median(one_us), eight = Median(batch_us),
               get = Median(get_us), flush = Median(flush_us), plain = Median(plain_us),
               late = Median(late_us) / 1000;
  const double one_ratio = (one - get) / floor;
  char table[4096];
  std::snprintf(
      table, sizeof table,
      "| figure | value | goal | verdict |\n|---|---|---|---|\n"
      "| empty NodeUnprepareResources (floor), median of %d | %.0f us | | |\n"
      "| claim GET alone (this process to the stand-in), median | %.0f us | reported on its own | "
      "|\n"
      "| prepare 1 claim, round trip, median | %.0f us (%.2fx floor) | | |\n"
      "| one checkpoint write alone (1.5 KB, in place, fdatasync; the agent's folder), median | "
      "%.0f us (%.2fx floor) | reported on its own | |\n"
      "| the same write the plain way (temporary file, fsync, rename, folder fsync), median | "
      "%.0f us; slots save %.0f us, %.0f%% of a 1-claim prepare | slots kept only if >= 20%% | "
      "%s |\n"
      "| prepare 1 claim less the claim GET, as a ratio to the floor | %.2fx | <= 1.5x | %s |\n"
      "| prepare a batch of 8 claims, round trip, median | %.0f us (%.2fx floor) | | |\n"
      "| prepare a batch of 8, each claim GET answered 2 ms late, median of %zu | %.1f ms | "
      "< 16 ms (8 GETs in a row) | %s |\n"
      "| ResourceSlices published after discovery (first create less the discovery GET) | %.1f "
      "ms | < 100 ms | %s |\n"
      "| idle wake-ups (context switches, all threads) per second, registered and published | "
      "%.2f /s | <= 2 /s | %s |\n"
      "| peak (VmHWM) after the calls | %.2f MiB | %s | %s |\n"
      "| RssAnon after the calls | %.2f MiB | | |\n"
      "| calls that failed | %d | 0 | %s |\n",
      calls, floor, get, one, one / floor, flush, flush / floor, plain, plain - flush,
      100 * (plain - flush) / one, (plain - flush) / one >= 0.2 ? "slots pay" : "slots do not pay",
      one_ratio,
      smoke              ? "(smoke)"
      : one_ratio <= 1.5 ? "pass"
                         : "MISS",
      eight, eight / floor, late_us.size(), late, late < 16 ? "pass" : "MISS", slices_ms,
      smoke             ? "(smoke)"
      : slices_ms < 100 ? "pass"
                        : "MISS",
      idle_wakeups,
      smoke                 ? "(smoke)"
      : idle_wakeups <= 2.0 ? "pass"
                            : "MISS",
      peak_mib, kPeakBudget,
      smoke                                                 ? "(smoke)"
      : !std::isnan(peak_mib) && peak_mib <= kPeakBudgetMib ? "pass"
                                                            : "MISS",
      anon_mib, errors, errors == 0 ? "pass" : "FAIL");
  std::fputs(table, stdout);
  if (!markdown.empty()) std::ofstream(markdown) << table;
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpu_agent::testing

int main(int argc, char** argv) { return gpu_agent::testing::Main(argc, argv); }
