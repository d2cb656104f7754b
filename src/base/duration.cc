#include "base/duration.h"

#include <cstdint>
#include <random>

#include "base/strings.h"

namespace gpu_agent {

absl::StatusOr<Duration> ParseDuration(std::string_view text) {
  if (text == "0") return Duration(0);
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  int64_t total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t digits_start = i;
    int64_t number = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      number = number * 10 + (text[i] - '0');
      if (number > int64_t{1} << 40) {
        return absl::InvalidArgumentError(StrCat("duration \"", text, "\" is too large"));
      }
      ++i;
    }
    if (i == digits_start) {
      return absl::InvalidArgumentError(
          StrCat("invalid duration \"", text, "\": expected a number followed by ms, s, m or h"));
    }
    size_t unit_start = i;
    while (i < text.size() && (text[i] < '0' || text[i] > '9')) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    int64_t scale;
    if (unit == "ms") {
      scale = 1;
    } else if (unit == "s") {
      scale = 1000;
    } else if (unit == "m") {
      scale = 60 * 1000;
    } else if (unit == "h") {
      scale = 3600 * 1000;
    } else {
      return absl::InvalidArgumentError(StrCat("invalid duration \"", text, "\": unknown unit \"",
                                               unit, "\" (use ms, s, m or h, as in 30s or 5m)"));
    }
    total_ms += number * scale;
  }
  return Duration(total_ms);
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  const int64_t hours = ms / 3600000;
  ms %= 3600000;
  const int64_t minutes = ms / 60000;
  ms %= 60000;
  const int64_t seconds = ms / 1000;
  ms %= 1000;
  if (hours) StrAppend(&out, hours, "h");
  if (minutes) StrAppend(&out, minutes, "m");
  if (seconds) StrAppend(&out, seconds, "s");
  if (ms) StrAppend(&out, ms, "ms");
  return out;
}

Duration Jitter(Duration d) { return Spread(d, 0.8, 1.2); }

Duration Spread(Duration d, double low, double high) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> factor(low, high);
  return Duration(static_cast<int64_t>(static_cast<double>(d.count()) * factor(rng)));
}

}  // namespace gpu_agent
