// Scalar values from config, env, flags and the API server: durations
// (which must print back to themselves), whole-number counts (--count,
// replicas), extended resource names and Node names.
#include <chrono>

#include "base/duration.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::AsView(data, size);
  if (absl::StatusOr<Duration> d = ParseDuration(text); d.ok()) {
    fuzz::Check(d->count() >= 0, "a negative duration");
    fuzz::Check(*d <= std::chrono::hours(kMaxDurationHours), "a duration over the cap");
    const std::string printed = FormatDuration(*d);
    absl::StatusOr<Duration> again = ParseDuration(printed);
    fuzz::Check(again.ok() && *again == *d, "FormatDuration does not parse back to itself");
  } else {
    fuzz::Check(!d.status().message().empty(), "error without a message");
  }
  int64_t count = 0;
  if (ParseInt(text, &count)) {
    int64_t again = 0;
    fuzz::Check(ParseInt(StrCat(count), &again) && again == count, "a count does not print back");
    fuzz::Check(text.front() != '+' || count >= 0, "\"+\" before a negative number");
  }
  int small = 0;
  (void)ParseInt(text, &small);
  (void)ValidateExtendedResourceName(text);
  (void)ValidateNodeName(text);
  return 0;
}
