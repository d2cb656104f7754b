// Go-style durations ("90s", "5m", "1h30m", "250ms"), the form NVIDIA's
// config and Kubernetes use.
#ifndef GPU_AGENT_BASE_DURATION_H_
#define GPU_AGENT_BASE_DURATION_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpu_agent {

using Duration = std::chrono::milliseconds;

// The longest duration ParseDuration accepts (10 years): timers add it to a
// nanosecond clock, which holds 292 years.
inline constexpr int64_t kMaxDurationHours = 87600;

// Parses a non-negative duration in Go's syntax (absl::ParseDuration): units
// ns, us, ms, s, m, h, several in a row ("1h30m"), fractions ("1.5s"); a bare
// "0" is allowed. Refused: negative, infinite, over kMaxDurationHours, or
// finer than a millisecond. Errors quote the text and say what is wrong.
absl::StatusOr<Duration> ParseDuration(std::string_view text);

// The text ParseDuration reads back to `d` ("5m", "1h30m", "1m1.5s", "0").
std::string FormatDuration(Duration d);

// `d` scaled by a random factor in [0.8, 1.2]: spreads retries of many
// nodes (or plugins) that failed at the same moment. Thread-safe.
Duration Jitter(Duration d);
// `d` scaled by a random factor in [low, high): timers that many nodes
// started together must not keep firing together. Thread-safe.
Duration Spread(Duration d, double low, double high);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_DURATION_H_
