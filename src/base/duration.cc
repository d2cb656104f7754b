#include "base/duration.h"

#include <cstdint>
#include <random>

#include "absl/time/time.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

constexpr const char* kUnits = "ms, s, m or h, as in 30s or 5m";

// Why `text` is not a duration, for an input absl::ParseDuration refused:
// the first piece that is not "<number><unit>".
absl::Status Diagnose(std::string_view text) {
  size_t i = (text.front() == '+' || text.front() == '-') ? 1 : 0;
  while (i < text.size()) {
    const size_t number_start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    if (i == number_start) break;
    if (i - number_start > 18) {
      return absl::InvalidArgumentError(
          StrCat("duration \"", text, "\" is too large (at most ", kMaxDurationHours, "h)"));
    }
    const size_t unit_start = i;
    while (i < text.size() && !(text[i] >= '0' && text[i] <= '9') && text[i] != '.') ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit.empty()) break;
    if (unit != "ns" && unit != "us" && unit != "\xc2\xb5s" && unit != "ms" && unit != "s" &&
        unit != "m" && unit != "h") {
      return absl::InvalidArgumentError(StrCat("invalid duration \"", text, "\": unknown unit \"",
                                               unit, "\" (use ", kUnits, ")"));
    }
  }
  return absl::InvalidArgumentError(
      StrCat("invalid duration \"", text, "\": expected a number followed by ", kUnits));
}

}  // namespace

absl::StatusOr<Duration> ParseDuration(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  absl::Duration d;
  if (!absl::ParseDuration(absl::string_view(text.data(), text.size()), &d) ||
      d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
    return Diagnose(text);
  }
  if (d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(StrCat("invalid duration \"", text, "\": it is negative"));
  }
  if (d > absl::Hours(kMaxDurationHours)) {
    return absl::InvalidArgumentError(
        StrCat("duration \"", text, "\" is too large (at most ", kMaxDurationHours, "h)"));
  }
  if (absl::Trunc(d, absl::Milliseconds(1)) != d) {
    return absl::InvalidArgumentError(
        StrCat("invalid duration \"", text, "\": finer than a millisecond"));
  }
  return Duration(absl::ToInt64Milliseconds(d));
}

std::string FormatDuration(Duration d) {
  return absl::FormatDuration(absl::Milliseconds(d.count()));
}

Duration Jitter(Duration d) { return Spread(d, 0.8, 1.2); }

Duration Spread(Duration d, double low, double high) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> factor(low, high);
  return Duration(static_cast<int64_t>(static_cast<double>(d.count()) * factor(rng)));
}

}  // namespace gpu_agent
