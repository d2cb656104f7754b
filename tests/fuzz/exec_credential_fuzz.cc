// The stdout of a kubeconfig exec credential plugin (ExecCredential JSON).
#include "apiserver/exec_credential.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<apiserver::ExecCredential> c =
      apiserver::ParseExecCredential(fuzz::AsView(data, size));
  if (c.ok()) {
    fuzz::Check(apiserver::CheckBearerToken(c->token).ok(),
                "an ExecCredential whose token cannot go in an HTTP header");
  } else {
    fuzz::Check(!c.status().message().empty(), "error without a message");
  }
  return 0;
}
