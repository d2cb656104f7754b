// kubelet-sim: the kubelet simulator as a program, for the demo and manual
// runs. Prints each registration and device list; on request allocates.
//   kubelet-sim DIR [--allocate N] [--exit-after-updates K]
// Or the kubelet's DRA side, once: registers the driver's plugin found in the
// registry folder, makes one NodePrepareResources or NodeUnprepareResources
// call for one claim, prints the answer and exits (0 when the claim's answer
// has no error).
//   kubelet-sim dra REGISTRY_DIR DRIVER prepare|unprepare NAMESPACE/NAME/UID
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "allocate_text.h"
#include "dra_kubelet.h"
#include "kubelet_simulator.h"

using gpu_agent::testing::AllocateText;
using gpu_agent::testing::DraKubelet;
using gpu_agent::testing::KubeletSimulator;

namespace {

int Dra(int argc, char** argv) {
  const std::string verb = argc == 6 ? argv[4] : "";
  const std::string claim = argc == 6 ? argv[5] : "";
  const size_t a = claim.find('/'), b = claim.rfind('/');
  if ((verb != "prepare" && verb != "unprepare") || a == std::string::npos || a == b) {
    std::fprintf(stderr, "usage: %s dra REGISTRY_DIR DRIVER prepare|unprepare NAMESPACE/NAME/UID\n",
                 argv[0]);
    return 2;
  }
  const gpu_agent::dra::ClaimRef ref{claim.substr(0, a), claim.substr(b + 1),
                                     claim.substr(a + 1, b - a - 1)};
  const std::string driver = argv[3];
  DraKubelet::Options o;
  o.registry_dir = argv[2];
  DraKubelet kubelet(o);
  if (!kubelet.Start() || !kubelet.WaitForPlugin(driver, std::chrono::seconds(20))) {
    std::fprintf(stderr, "kubelet-sim: no DRA plugin %s registered in %s\n", driver.c_str(),
                 argv[2]);
    return 1;
  }
  const auto plugin = kubelet.plugin(driver);
  std::printf("kubelet-sim: DRA plugin registered: driver %s, endpoint %s, version %s\n",
              driver.c_str(), plugin->endpoint.c_str(), plugin->version.c_str());
  const std::string named = ref.name_space + "/" + ref.name + " (" + ref.uid + ")";
  std::string error;
  grpc::Status s;
  if (verb == "prepare") {
    std::map<std::string, gpu_agent::dra::PrepareOutcome> out;
    s = kubelet.Prepare(driver, {ref}, &out);
    error = out[ref.uid].error;
    for (const auto& d : out[ref.uid].devices) {
      std::string ids;
      for (const std::string& id : d.cdi_ids) ids += (ids.empty() ? "" : ",") + id;
      std::printf("kubelet-sim: NodePrepareResources %s: pool %s device %s cdi %s\n", named.c_str(),
                  d.pool.c_str(), d.device.c_str(), ids.c_str());
    }
  } else {
    std::map<std::string, std::string> out;
    s = kubelet.Unprepare(driver, {ref}, &out);
    error = out[ref.uid];
    if (s.ok() && error.empty()) {
      std::printf("kubelet-sim: NodeUnprepareResources %s: done\n", named.c_str());
    }
  }
  if (!s.ok()) error = "the call failed: " + s.error_message();
  if (!error.empty())
    std::printf("kubelet-sim: %s %s: ERROR %s\n", verb.c_str(), named.c_str(), error.c_str());
  std::fflush(stdout);
  kubelet.Stop();
  return error.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "dra") == 0) return Dra(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [--allocate N] [--exit-after-updates K]\n", argv[0]);
    return 2;
  }
  int allocate = 0, exit_after = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--allocate") == 0) allocate = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--exit-after-updates") == 0) exit_after = std::atoi(argv[i + 1]);
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  KubeletSimulator sim(argv[1]);
  if (!sim.Start()) {
    std::fprintf(stderr, "kubelet-sim: cannot serve %s\n", sim.socket().c_str());
    return 1;
  }
  std::printf("kubelet-sim: serving %s\n", sim.socket().c_str());
  std::fflush(stdout);
  if (!sim.WaitForRegistrations(1, std::chrono::minutes(5))) return 1;
  const auto req = sim.registration_requests().front();
  std::printf("kubelet-sim: plugin registered: resource %s, endpoint %s, version %s\n",
              req.resource_name().c_str(), req.endpoint().c_str(), req.version().c_str());
  std::fflush(stdout);
  size_t seen = 0;
  bool allocated = false;
  for (;;) {
    sim.WaitForUpdateCount(req.resource_name(), seen + 1, std::chrono::milliseconds(200));
    auto updates = sim.Updates(req.resource_name());
    for (; seen < updates.size(); ++seen) {
      std::printf("kubelet-sim: ListAndWatch update %zu:", seen + 1);
      for (const auto& d : updates[seen].devices) {
        std::printf(" %s=%s", d.id().c_str(), d.health().c_str());
      }
      std::printf("\n");
      std::fflush(stdout);
      if (allocate > 0 && !allocated) {
        allocated = true;
        v1beta1::AllocateRequest a;
        auto* c = a.add_container_requests();
        for (int i = 0; i < allocate && i < static_cast<int>(updates[seen].devices.size()); ++i) {
          c->add_devices_ids(updates[seen].devices[static_cast<size_t>(i)].id());
        }
        v1beta1::AllocateResponse r;
        grpc::Status s = sim.Allocate(req.resource_name(), a, &r);
        std::printf("kubelet-sim: Allocate %d -> %s %s\n", allocate, s.ok() ? "OK" : "ERROR",
                    s.ok() ? AllocateText(r).c_str() : s.error_message().c_str());
        std::fflush(stdout);
      }
    }
    if (exit_after > 0 && static_cast<int>(seen) >= exit_after) break;
    timespec zero{0, 0};
    if (sigtimedwait(&set, nullptr, &zero) > 0) break;
  }
  sim.Stop();
  return 0;
}
