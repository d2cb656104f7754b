// How the slice publisher tells a refused request: the server's Status, and
// for a 403 whether it is a server still loading its RBAC rules (seconds
// after its start) or a role that lacks the permission.
#ifndef GPU_AGENT_DRA_SLICE_REFUSAL_H_
#define GPU_AGENT_DRA_SLICE_REFUSAL_H_

#include <chrono>
#include <string>

#include "apiserver/rest_client.h"

namespace gpu_agent::dra {

// How long a server has answered nothing but 403: from the first 403 of a
// run; any other answer (or Reset) starts it over.
class ForbiddenSpell {
 public:
  std::chrono::steady_clock::duration Answered(int status) {
    if (status != 403) {
      Reset();
      return {};
    }
    const auto now = std::chrono::steady_clock::now();
    if (since_ == std::chrono::steady_clock::time_point{}) since_ = now;
    return now - since_;
  }
  void Reset() { since_ = {}; }

 private:
  std::chrono::steady_clock::time_point since_{};  // the epoch: not refused
};

// What a refused request's log line says: the server's message; for a 403
// what is known of it: the server's authorizer refused, which a server does
// for a few seconds after its start while its RBAC caches fill; once it has
// refused for `for_good` (`forbidden_for`), that the role lacks the
// permission `verb` on resourceslices.
std::string Refusal(const apiserver::HttpResponse& r, const char* verb,
                    std::chrono::steady_clock::duration forbidden_for,
                    std::chrono::milliseconds for_good);

// A Retry-After past this is taken as the server's mistake.
inline constexpr std::chrono::milliseconds kMaxRetryAfter = std::chrono::minutes(5);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_SLICE_REFUSAL_H_
