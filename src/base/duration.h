// Go-style durations ("90s", "5m", "1h30m", "250ms"), the form NVIDIA's
// config and Kubernetes use.
#ifndef GPU_AGENT_BASE_DURATION_H_
#define GPU_AGENT_BASE_DURATION_H_

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpu_agent {

using Duration = std::chrono::milliseconds;

// Parses a non-negative duration. Units: ms, s, m, h; several may follow one
// another ("1h30m"). A bare "0" is allowed. Fractions are not.
absl::StatusOr<Duration> ParseDuration(std::string_view text);

// The shortest text ParseDuration reads back to `d` ("5m", "1h30m", "250ms").
std::string FormatDuration(Duration d);

// `d` scaled by a random factor in [0.8, 1.2]: spreads retries of many
// nodes (or plugins) that failed at the same moment. Thread-safe.
Duration Jitter(Duration d);
// `d` scaled by a random factor in [low, high): timers that many nodes
// started together must not keep firing together. Thread-safe.
Duration Spread(Duration d, double low, double high);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_DURATION_H_
