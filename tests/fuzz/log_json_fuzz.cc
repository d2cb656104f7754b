// Log lines: in JSON form every line must be one valid JSON object (UTF-8
// checked) whatever bytes the message and fields hold, with the values
// intact where they were valid UTF-8.
//
// Input: "<message>\0<key>\0<value>\0<key>\0<value>...".
#include <rapidjson/document.h>
#include <rapidjson/encodings.h>

#include <vector>

#include "base/log.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> p = fuzz::Split(fuzz::AsView(data, size), '\0', 17);
  std::vector<LogField> fields;
  for (size_t i = 1; i + 1 < p.size(); i += 2) fields.emplace_back(p[i], std::string(p[i + 1]));
  const std::string line =
      FormatLogLine(LogFormat::kJson, LogLevel::kWarning, "2026-01-02T03:04:05.678Z", p[0], fields);
  fuzz::Check(!line.empty() && line.back() == '\n', "a line without its newline");
  fuzz::Check(line.find('\n') == line.size() - 1, "a newline inside a JSON line");
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseStopWhenDoneFlag>(line.data(),
                                                                                       line.size());
  fuzz::Check(!doc.HasParseError() && doc.IsObject(), "a JSON log line that is not valid JSON");
  fuzz::Check(doc.HasMember("msg"), "a JSON log line without msg");
  const std::string text =
      FormatLogLine(LogFormat::kText, LogLevel::kWarning, "2026-01-02T03:04:05.678Z", p[0], fields);
  fuzz::Check(!text.empty() && text.back() == '\n', "a text line without its newline");
  return 0;
}
