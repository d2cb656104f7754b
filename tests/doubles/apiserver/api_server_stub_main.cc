// apiserver-stub: the API server stand-in as a program, for the demo.
//   apiserver-stub NODE [--claim NAMESPACE/NAME/UID DRIVER DEVICE]
// Serves plain HTTP on a free loopback port (printed on stdout) with one
// Node. SIGUSR1 does what a kubelet re-registering the node does: sets
// nvidia.com/gpu to 0. SIGTERM or SIGINT stops it. With --claim it also
// serves resource.k8s.io/v1 and one ResourceClaim, allocated by the
// scheduler to DEVICE of DRIVER in the node's pool.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "api_server_stub.h"

int main(int argc, char** argv) {
  const bool claim = argc == 6 && std::strcmp(argv[2], "--claim") == 0;
  const std::string ref = claim ? argv[3] : "";
  const size_t a = ref.find('/'), b = ref.rfind('/');
  if ((argc != 2 && !claim) || (claim && (a == std::string::npos || a == b))) {
    std::fprintf(stderr, "usage: %s NODE [--claim NAMESPACE/NAME/UID DRIVER DEVICE]\n", argv[0]);
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  gpu_agent::testing::ApiServerStub api;
  api.AddNode(argv[1]);
  if (claim) {
    const std::string ns = ref.substr(0, a), name = ref.substr(a + 1, b - a - 1);
    api.ServeResourceVersions({"v1"});
    api.PutResourceClaim(
        ns, name,
        R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")" + name +
            R"(","namespace":")" + ns + R"(","uid":")" + ref.substr(b + 1) +
            R"("},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":")" +
            argv[4] +
            R"("}}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":")" +
            argv[4] + R"(","pool":")" + argv[1] + R"(","device":")" + argv[5] + R"("}]}}}})");
    std::printf("apiserver-stub: ResourceClaim %s allocated %s/%s/%s\n", ref.c_str(), argv[4],
                argv[1], argv[5]);
  }
  std::printf("apiserver-stub: serving %s with node %s\n", api.url().c_str(), argv[1]);
  std::fflush(stdout);
  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != SIGUSR1) break;
    api.KubeletSetsCapacity(argv[1], "nvidia.com/gpu", "0");
    std::printf("apiserver-stub: node %s re-registered by its kubelet: nvidia.com/gpu is 0\n",
                argv[1]);
    std::fflush(stdout);
  }
  return 0;
}
