// Process-wide structured logging: one line per event, text or JSON, to
// stderr. Thread-safe: lines from different threads never interleave.
#ifndef GPU_AGENT_BASE_LOG_H_
#define GPU_AGENT_BASE_LOG_H_

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace gpu_agent {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view s);
absl::StatusOr<LogFormat> ParseLogFormat(std::string_view s);

// Sets the threshold and format for all later lines.
void SetLogOptions(LogLevel level, LogFormat format);
bool LogEnabled(LogLevel level);

using LogField = std::pair<std::string_view, std::string>;

// Writes one line: "<time> <LEVEL> <message> key=value ..." in text form, or a
// JSON object with ts, level, msg and the fields. Never log secrets here.
void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields = {});
// The same with fields gathered at run time.
void Log(LogLevel level, std::string_view message, std::span<const LogField> fields);

// The line Log writes, newline included. In JSON form every string is valid
// UTF-8 (other bytes become U+FFFD), so the line is valid JSON whatever the
// message and fields hold.
std::string FormatLogLine(LogFormat format, LogLevel level, std::string_view timestamp,
                          std::string_view message, std::span<const LogField> fields);

inline void LogDebug(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kDebug, m, f);
}
inline void LogInfo(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarning(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarning, m, f);
}
inline void LogError(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_LOG_H_
