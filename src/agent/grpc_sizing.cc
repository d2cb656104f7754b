// How many cores gRPC is told the machine has: at most kGrpcCores.
//
// gRPC 1.51 sizes its thread pools from the core count it reads with
// sysconf(_SC_NPROCESSORS_CONF) (gpr_cpu_num_cores): its EventEngine keeps
// one idle thread per core, 2 to 32. A node agent serving one kubelet on a
// unix socket gains nothing from per-core pools, and on a 128-core GPU
// server they are 32 threads doing nothing; gRPC has no setting for this.
// So the gpu-agent executable (only it: this file is not in the library the
// tests link) answers that one question itself, and gRPC's pools are the
// same on 2 cores as on 128. Every other sysconf query goes to libc.
#include <dlfcn.h>
#include <unistd.h>

namespace {

constexpr long kGrpcCores = 2;

using SysconfFn = long (*)(int);

SysconfFn RealSysconf() {
  static const SysconfFn real = reinterpret_cast<SysconfFn>(dlsym(RTLD_NEXT, "sysconf"));
  return real;
}

}  // namespace

extern "C" long sysconf(int name) {
  const SysconfFn real = RealSysconf();
  const long value = real != nullptr ? real(name) : -1;
  if ((name == _SC_NPROCESSORS_CONF || name == _SC_NPROCESSORS_ONLN) && value > kGrpcCores) {
    return kGrpcCores;
  }
  return value;
}
