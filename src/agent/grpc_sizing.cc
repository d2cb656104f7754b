// How many cores gRPC is told the machine has: at most kGrpcCores.
//
// gRPC 1.51 sizes its thread pools from gpr_cpu_num_cores(), which reads
// sysconf(_SC_NPROCESSORS_CONF): its EventEngine keeps one idle thread per
// core, 2 to 32, and its executors size themselves likewise. A node agent
// serving one kubelet on a unix socket gains nothing from per-core pools,
// and on a 128-core GPU server they are 32 threads doing nothing. 1.51 has
// no setting for it: no channel or server argument, environment variable or
// ResourceQuota limit reaches these pools (ResourceQuota::SetMaxThreads caps
// only the synchronous server's request threads, which the agent does not
// use).
//
// So the gpu-agent executable defines gRPC's own two entry points of
// src/core/lib/gpr/cpu_linux.cc, and only gRPC's question gets the capped
// answer: std::thread::hardware_concurrency(), sysconf and every other
// library see the machine's real count. gRPC is linked from Debian's static archives
// (gpu_agent_deps), where cpu_linux.cc.o defines exactly these two
// functions and nothing else outside it; with both defined here the linker
// never pulls that member in. Should a later gRPC add a symbol to it that
// something needs, the link fails with a duplicate definition rather than
// running with two answers. Against shared gRPC libraries (GPU_AGENT_STATIC_DEPS
// off) the executable's definitions take precedence over libgpr's in the
// same way. Every test binary links this file too (gpu_agent_grpc_sizing),
// so gRPC in a test runs the pools users get.
#include <grpc/support/cpu.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace {

// One: gRPC's I/O-manager timer list keeps two shards per core, each
// shard's window (at most a second, shorter after short timers) ends on its
// own, and its timer thread wakes at each end. Told of two cores, DRA mode's
// idle agent woke 2.9, 1.0 and 1.1 times a second on that thread in three
// runs, told of one 1.0 in each; plugin mode, all threads, 1.90 -> 1.40 a
// second (bench/RESULTS.md, "Footprint: the code each mode runs, laid out
// together"). The agent's gRPC work is a handful of streams over unix
// sockets; the executors gRPC sizes by the count gain it nothing.
constexpr long kGrpcCores = 1;

}  // namespace

// As gRPC's own: the configured cores, at least 1; then at most kGrpcCores.
extern "C" unsigned gpr_cpu_num_cores(void) {
  static const unsigned cores = [] {
    const long n = ::sysconf(_SC_NPROCESSORS_CONF);
    return static_cast<unsigned>(std::clamp(n, 1L, kGrpcCores));
  }();
  return cores;
}

// gRPC's contract: a value in [0, gpr_cpu_num_cores() - 1]; a shard index
// for its per-CPU counters, advisory only.
extern "C" unsigned gpr_cpu_current_cpu(void) {
  const int cpu = ::sched_getcpu();
  return cpu < 0 ? 0 : static_cast<unsigned>(cpu) % gpr_cpu_num_cores();
}
