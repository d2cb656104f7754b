// podresources-list SOCKET: asks a kubelet's PodResources API (v1 List) once
// and prints what the pods hold, one line a device: device-plugin devices
// ("device POD CONTAINER RESOURCE ID") and DRA claims' devices ("claim POD
// CONTAINER CLAIM DRIVER/POOL/DEVICE"). For trying a node by hand.
#include <chrono>
#include <cstdio>

#include "podresources/pod_resources.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <kubelet root>/pod-resources/kubelet.sock\n", argv[0]);
    return 2;
  }
  auto got = gpu_agent::podresources::List(argv[1], std::chrono::seconds(5));
  if (!got.ok()) {
    std::fprintf(stderr, "podresources-list: %s\n", got.status().ToString().c_str());
    return 1;
  }
  std::printf("pods %zu\n", got->pods);
  for (const auto& d : got->devices) {
    std::printf("device %s %s %s %s\n", d.pod.c_str(), d.container.c_str(), d.resource.c_str(),
                d.id.c_str());
  }
  for (const auto& d : got->claim_devices) {
    std::printf("claim %s %s %s %s/%s/%s%s%s\n", d.pod.c_str(), d.container.c_str(),
                d.claim.c_str(), d.driver.c_str(), d.pool.c_str(), d.device.c_str(),
                d.share_id.empty() ? "" : " share=", d.share_id.c_str());
  }
  return 0;
}
