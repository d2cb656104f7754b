// gRPC's EventEngine for the agent: its closures and timers on threads that
// sleep until there is work, so an idle agent's gRPC does not wake.
//
// gRPC 1.51 runs its own EventEngine beside the older I/O manager: in the
// agent it carries closures (Run) and timers (RunAfter) only, since the
// sockets, connections and lookups are still the I/O manager's. Its timer
// thread ("timer_manager") rechecks its timer lists at least once a second
// whether or not a timer is due (a list's window is at most a second), and
// it keeps two pool threads ("event_engine") besides. gRPC's public
// SetEventEngineFactory replaces it; this one holds its timers in one
// ordered list and waits for the earliest with no window, and runs closures
// on worker threads that block with no deadline.
#pragma once

#include <grpc/event_engine/event_engine.h>

#include <memory>

namespace gpu_agent {

// A new engine (for tests; gRPC gets its own through InstallGrpcEventEngine).
std::unique_ptr<grpc_event_engine::experimental::EventEngine> MakeGrpcEventEngine();

// Makes gRPC create its default EventEngine with MakeGrpcEventEngine. Called
// where gRPC builds its configuration (agent/grpc_plugins.cc), on gRPC's
// first use, before it makes an engine; so a process that never uses gRPC
// never runs gRPC's code for it. It does nothing where GRPC_EXPERIMENTS is
// set: gRPC's experiments can route sockets through the EventEngine, which
// this one does not serve.
void InstallGrpcEventEngine();

}  // namespace gpu_agent
