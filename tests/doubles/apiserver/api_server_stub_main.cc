// apiserver-stub: the API server stand-in as a program, for the demo.
//   apiserver-stub NODE
// Serves plain HTTP on a free loopback port (printed on stdout) with one
// Node. SIGUSR1 does what a kubelet re-registering the node does: sets
// nvidia.com/gpu to 0. SIGTERM or SIGINT stops it.
#include <signal.h>

#include <cstdio>

#include "api_server_stub.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s NODE\n", argv[0]);
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
