#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::mutex g_write_mu;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

// A JSON string; bytes that are not UTF-8 become U+FFFD, so the line stays
// valid JSON whatever a value holds (a server's message, a file name).
void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else if (c < 0x80) {
          out->push_back(static_cast<char>(c));
        } else if (const size_t n = Utf8SequenceLength(s.substr(i)); n > 0) {
          out->append(s.substr(i, n));
          i += n;
          continue;
        } else {
          *out += "\\ufffd";
        }
    }
    ++i;
  }
  out->push_back('"');
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n' || c == '\t') return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warning" || s == "warn") return LogLevel::kWarning;
  if (s == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      StrCat("invalid log level \"", s, "\" (use debug, info, warning or error)"));
}

absl::StatusOr<LogFormat> ParseLogFormat(std::string_view s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(StrCat("invalid log format \"", s, "\" (use text or json)"));
}

void SetLogOptions(LogLevel level, LogFormat format) {
  g_level.store(static_cast<int>(level));
  g_format.store(static_cast<int>(format));
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

std::string FormatLogLine(LogFormat format, LogLevel level, std::string_view timestamp,
                          std::string_view message, std::span<const LogField> fields) {
  std::string line;
  if (format == LogFormat::kJson) {
    line = "{\"ts\":";
    AppendJsonString(&line, timestamp);
    line += ",\"level\":";
    AppendJsonString(&line, LevelName(level));
    line += ",\"msg\":";
    AppendJsonString(&line, message);
    for (const auto& [key, value] : fields) {
      line.push_back(',');
      AppendJsonString(&line, key);
      line.push_back(':');
      AppendJsonString(&line, value);
    }
    line += "}\n";
  } else {
    StrAppend(&line, timestamp, " ", LevelName(level), " ", message);
    for (const auto& [key, value] : fields) {
      StrAppend(&line, " ", key, "=");
      if (NeedsQuotes(value)) {
        AppendJsonString(&line, value);
      } else {
        line += value;
      }
    }
    line.push_back('\n');
  }
  return line;
}

void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
  Log(level, message, std::span<const LogField>(fields.begin(), fields.size()));
}

void Log(LogLevel level, std::string_view message, std::span<const LogField> fields) {
  if (!LogEnabled(level)) return;
  const std::string line =
      FormatLogLine(static_cast<LogFormat>(g_format.load()), level, Timestamp(), message, fields);
  std::lock_guard<std::mutex> lock(g_write_mu);
  // One write(2) per line keeps lines whole even across processes sharing stderr.
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

}  // namespace gpu_agent
