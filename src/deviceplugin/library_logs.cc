#include "deviceplugin/library_logs.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include <string>
#include <string_view>

#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::deviceplugin {
namespace {

// "src/core/lib/surface/call.cc" -> "call.cc:123": where, short.
std::string Where(const char* file, int line) {
  std::string_view f = file != nullptr ? file : "?";
  if (size_t slash = f.rfind('/'); slash != std::string_view::npos) f.remove_prefix(slash + 1);
  return StrCat(f, ":", line);
}

LogLevel FromGrpc(gpr_log_severity s) {
  switch (s) {
    case GPR_LOG_SEVERITY_DEBUG:
      return LogLevel::kDebug;
    case GPR_LOG_SEVERITY_INFO:
      return LogLevel::kInfo;
    case GPR_LOG_SEVERITY_ERROR:
      break;
  }
  return LogLevel::kError;
}

void GrpcLine(gpr_log_func_args* args) {
  Log(FromGrpc(args->severity), args->message != nullptr ? args->message : "",
      {{"source", "grpc"}, {"at", Where(args->file, args->line)}});
}

// protobuf's ERROR covers refused input (a string that is not UTF-8) and
// misuse (DFATAL in a release build) alike, so it stays an error. FATAL: once
// the handler returns, protobuf throws FatalException (or aborts, built
// without exceptions), so the line is written first.
LogLevel FromProtobuf(google::protobuf::LogLevel l) {
  switch (l) {
    case google::protobuf::LOGLEVEL_INFO:
      return LogLevel::kInfo;
    case google::protobuf::LOGLEVEL_WARNING:
      return LogLevel::kWarning;
    case google::protobuf::LOGLEVEL_ERROR:
    case google::protobuf::LOGLEVEL_FATAL:
      break;
  }
  return LogLevel::kError;
}

void ProtobufLine(google::protobuf::LogLevel l, const char* file, int line,
                  const std::string& message) {
  Log(FromProtobuf(l), message, {{"source", "protobuf"}, {"at", Where(file, line)}});
}

}  // namespace

void RouteLibraryLogs() {
  gpr_set_log_function(GrpcLine);
  google::protobuf::SetLogHandler(ProtobufLine);
}

}  // namespace gpu_agent::deviceplugin
