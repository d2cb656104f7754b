// Small text helpers used for error messages.
#ifndef GPU_AGENT_BASE_TEXT_H_
#define GPU_AGENT_BASE_TEXT_H_

#include <string>
#include <string_view>
#include <vector>

namespace gpu_agent {

// Levenshtein distance, for did-you-mean suggestions.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is a plausible typo of it (distance
// at most a third of its length, and at least 1 edit allowed), else "".
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// Renders bytes for a log line: printable ASCII kept, everything else \xNN,
// cut after `max` bytes.
std::string Printable(std::string_view bytes, size_t max = 80);

// The length of the well-formed UTF-8 sequence at the start of `s`
// (Unicode's table 3-7: no overlong forms, surrogates or code points past
// U+10FFFF), or 0 when it is not one (or `s` is empty).
size_t Utf8SequenceLength(std::string_view s);

// `s` as valid UTF-8 (a byte that starts no well-formed sequence becomes
// U+FFFD) of at most `max` bytes: a longer one is cut after a whole
// character and ends with "...", as the kubelet cuts a device's health
// message.
std::string Utf8Clip(std::string_view s, size_t max);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_TEXT_H_
