// kubelet-sim: the kubelet simulator as a program, for the demo and manual
// runs. Prints each registration and device list; on request allocates.
//   kubelet-sim DIR [--allocate N] [--exit-after-updates K]
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kubelet_simulator.h"

using gpu_agent::testing::KubeletSimulator;

int main(int argc, char** argv) {
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
                    s.ok() ? r.ShortDebugString().c_str() : s.error_message().c_str());
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
