// kubeconfig loading with merged files (KUBECONFIG=a:b:c, first wins), the
// context choice, base64 -data forms, exec settings, then the server URL as
// the connection code parses it.
//
// Input: "<context>\0<file a>\0<file b>\0<file c>". An empty context means
// current-context; an empty or absent file part is a missing file in the
// list (kubectl skips those).
#include <unistd.h>

#include <string>

#include "apiserver/connection.h"
#include "apiserver/kubeconfig.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = fuzz::Split(fuzz::AsView(data, size), '\0', 4);
  std::string paths;
  for (size_t i = 0; i < 3; ++i) {
    const std::string path = fuzz::TempDir() + "/kubeconfig-" + std::to_string(i);
    if (i + 1 < parts.size() && !parts[i + 1].empty()) {
      fuzz::WriteFileOrDie(path, parts[i + 1]);
    } else {
      ::unlink(path.c_str());
    }
    paths += (i ? ":" : "") + path;
  }
  absl::StatusOr<apiserver::KubeconfigSelection> sel =
      apiserver::LoadKubeconfig(paths, std::string(parts[0]));
  if (!sel.ok()) {
    fuzz::Check(!sel.status().message().empty(), "kubeconfig error without a message");
    return 0;
  }
  fuzz::Check(!sel->server.empty(), "a selection without a server");
  absl::StatusOr<apiserver::Endpoint> e = apiserver::ParseServerUrl(sel->server);
  if (e.ok()) {
    // The URL the agent prints must parse back to the same endpoint.
    absl::StatusOr<apiserver::Endpoint> again = apiserver::ParseServerUrl(e->Url());
    fuzz::Check(again.ok(), "Endpoint::Url() does not parse back");
    fuzz::Check(again->scheme == e->scheme && again->host == e->host && again->port == e->port &&
                    again->path_prefix == e->path_prefix,
                "Endpoint::Url() parses back to another endpoint");
  }
  return 0;
}
