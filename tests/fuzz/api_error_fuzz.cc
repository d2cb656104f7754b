// API server answers turned into statuses: any HTTP code and body (a
// Kubernetes Status object, HTML from a proxy, garbage).
//
// Input: two bytes of status code (taken modulo 600), then the body.
#include "apiserver/node_client.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  apiserver::HttpResponse r;
  r.status = (data[0] << 8 | data[1]) % 600;
  r.body = std::string(fuzz::AsView(data + 2, size - 2));
  const absl::Status s = apiserver::ExplainAnswer(
      r, "gpu-node-1", "PATCH",
      R"([{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"4"}])");
  if (r.status >= 200 && r.status < 300) {
    fuzz::Check(s.ok(), "a 2xx answer explained as an error");
  } else {
    fuzz::Check(!s.ok() && !s.message().empty(), "an error answer without an explanation");
  }
  return 0;
}
