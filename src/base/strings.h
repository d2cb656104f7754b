// String helpers. Debian's abseil is built with its own absl::string_view (not
// std::string_view), so its StrCat family does not take std::string_view; the
// project uses these instead and keeps abseil for Status/StatusOr.
#ifndef GPU_AGENT_BASE_STRINGS_H_
#define GPU_AGENT_BASE_STRINGS_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpu_agent {
namespace strings_internal {

inline void AppendOne(std::string* out, std::string_view v) { out->append(v.data(), v.size()); }
inline void AppendOne(std::string* out, const char* v) { out->append(v ? v : "(null)"); }
inline void AppendOne(std::string* out, const std::string& v) { out->append(v); }
inline void AppendOne(std::string* out, absl::string_view v) { out->append(v.data(), v.size()); }
inline void AppendOne(std::string* out, char c) { out->push_back(c); }
inline void AppendOne(std::string* out, bool b) { out->append(b ? "true" : "false"); }
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
void AppendOne(std::string* out, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    out->append(std::to_string(v));
  } else {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    (void)ec;
    out->append(buf, end);
  }
}

}  // namespace strings_internal

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (strings_internal::AppendOne(out, args), ...);
}

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  StrAppend(&out, args...);
  return out;
}

template <typename Container>
std::string StrJoin(const Container& items, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out.append(sep);
    first = false;
    strings_internal::AppendOne(&out, item);
  }
  return out;
}

// Splits on `sep`; keeps empty pieces. Views point into `text`.
std::vector<std::string_view> StrSplit(std::string_view text, char sep);
std::string_view StripWhitespace(std::string_view text);
std::string AsciiToLower(std::string_view text);

// Whole-string integer parse, an optional sign first; false on any stray
// character (a second sign too: "+-7") or overflow.
template <typename T>
bool ParseInt(std::string_view text, T* out) {
  if (text.empty()) return false;
  if (text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_STRINGS_H_
