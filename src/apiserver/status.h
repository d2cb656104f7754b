// The Kubernetes Status object: what the API server says when it refuses a
// request (the body of a 4xx or 5xx answer) or ends a watch (the object of
// an ERROR event). The one reader of it.
#ifndef GPU_AGENT_APISERVER_STATUS_H_
#define GPU_AGENT_APISERVER_STATUS_H_

#include <string>
#include <string_view>

#include "apiserver/rest_client.h"

namespace gpu_agent::apiserver {

struct ApiStatus {
  int code = 0;         // 0: none given
  std::string reason;   // "Expired", "Forbidden", ...
  std::string message;  // the server's words; a body that is no Status: its start, printable
};

// Reads `json` as a Status (bounded parse, base/json). A body that is not
// one (HTML from a proxy, garbage) gives its start, printable, as message.
ApiStatus ReadStatus(std::string_view json, size_t max_message = 200);

// "<HTTP status>: <the Status's message>", for a log line or an error.
std::string StatusMessage(const HttpResponse& r);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_STATUS_H_
