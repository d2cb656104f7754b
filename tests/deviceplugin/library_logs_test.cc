// gRPC's and protobuf's log lines come out as the agent's own (base/log.h),
// in its format and under its level, with where they came from.
#include "deviceplugin/library_logs.h"

#include <fcntl.h>
#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "support/test_support.h"

namespace gpu_agent::deviceplugin {
namespace {

// What `write` puts on stderr (fd 2), read back from a file.
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& path) : path_(path) {
    saved_ = ::dup(2);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { Restore(); }
  std::vector<std::string> Lines() {
    Restore();
    std::vector<std::string> out;
    const std::string text = testing::ReadFile(path_);
    for (std::string_view l : StrSplit(text, '\n')) {
      if (!l.empty()) out.emplace_back(l);
    }
    return out;
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

rapidjson::Document ParseLine(const std::string& line) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(line.c_str());
  EXPECT_FALSE(doc.HasParseError()) << line;
  return doc;
}

std::string Field(const rapidjson::Document& doc, const char* key) {
  return doc.IsObject() && doc.HasMember(key) ? doc[key].GetString() : "(none)";
}

TEST(LibraryLogsTest, GrpcAndProtobufLinesAreTheAgentsJsonLines) {
  testing::TempDir dir;
  RouteLibraryLogs();
  SetLogOptions(LogLevel::kInfo, LogFormat::kJson);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);  // gRPC's own threshold: let all through
  std::vector<std::string> lines;
  {
    StderrCapture capture(dir.Join("stderr"));
    gpr_log(GPR_ERROR, "socket \"%s\" gone", "x\xff");
    gpr_log(GPR_DEBUG, "%s", "below the agent's level");
    GOOGLE_LOG(WARNING) << "protobuf says \xfe";
    GOOGLE_LOG(ERROR) << "String field contains invalid UTF-8 data";
    gpr_log_message(nullptr, 0, GPR_LOG_SEVERITY_ERROR, "");  // no file: "?"
    lines = capture.Lines();
  }
  SetLogOptions(LogLevel::kInfo, LogFormat::kText);
  ASSERT_EQ(lines.size(), 4u);
  const rapidjson::Document grpc = ParseLine(lines[0]);
  EXPECT_EQ(Field(grpc, "level"), "error");
  EXPECT_EQ(Field(grpc, "msg"), "socket \"x\xef\xbf\xbd\" gone");  // U+FFFD for the bad byte
  EXPECT_EQ(Field(grpc, "source"), "grpc");
  EXPECT_EQ(Field(grpc, "at").rfind("library_logs_test.cc:", 0), 0u) << lines[0];
  const rapidjson::Document warning = ParseLine(lines[1]);
  EXPECT_EQ(Field(warning, "level"), "warning");
  EXPECT_EQ(Field(warning, "source"), "protobuf");
  EXPECT_EQ(Field(warning, "msg"), "protobuf says \xef\xbf\xbd");
  const rapidjson::Document error = ParseLine(lines[2]);
  EXPECT_EQ(Field(error, "level"), "error");
  EXPECT_EQ(Field(error, "source"), "protobuf");
  const rapidjson::Document nameless = ParseLine(lines[3]);
  EXPECT_EQ(Field(nameless, "at"), "?:0");
  EXPECT_EQ(Field(nameless, "msg"), "");
}

}  // namespace
}  // namespace gpu_agent::deviceplugin
