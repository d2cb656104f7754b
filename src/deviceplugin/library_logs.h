// Routes what gRPC and Protocol Buffers log into the agent's own log
// (base/log.h), so that every line on stderr has the agent's format. Left
// alone, both write their own text to stderr: a kubelet request with a
// string that is not UTF-8 gets a "[libprotobuf ERROR ...]" line, which
// breaks a JSON log that a collector parses line by line.
#ifndef GPU_AGENT_DEVICEPLUGIN_LIBRARY_LOGS_H_
#define GPU_AGENT_DEVICEPLUGIN_LIBRARY_LOGS_H_

namespace gpu_agent::deviceplugin {

// Installs the handlers (gpr_set_log_function, and protobuf 3.21's
// SetLogHandler: later protobufs log through abseil instead). Call it before
// other threads use protobuf, whose setter is not thread-safe; calling it
// again installs the same handlers. gRPC's own threshold (GRPC_VERBOSITY,
// ERROR unless set, once gRPC is initialised) still decides which of its
// lines are written; the agent's level then applies as for any line.
void RouteLibraryLogs();

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_LIBRARY_LOGS_H_
