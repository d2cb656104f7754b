// LD_PRELOAD shim for benchmarks: makes the process believe it has
// $BENCH_CORES cores, through every libc call that reports the count
// (sysconf(_SC_NPROCESSORS_CONF / _ONLN), get_nprocs, get_nprocs_conf).
// gRPC sizes its thread pools from these, so a 2-core machine can measure
// what a 16- or 128-core node costs. Without $BENCH_CORES it changes nothing.
#include <dlfcn.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstdlib>

namespace {

long FakeCores() {
  const char* v = std::getenv("BENCH_CORES");
  if (v == nullptr) return 0;
  const long n = std::strtol(v, nullptr, 10);
  return n > 0 ? n : 0;
}

template <typename F>
F Real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

long sysconf(int name) {
  if (name == _SC_NPROCESSORS_CONF || name == _SC_NPROCESSORS_ONLN) {
    if (const long n = FakeCores(); n > 0) return n;
  }
  static auto real = Real<long (*)(int)>("sysconf");
  return real(name);
}

int get_nprocs() {
  if (const long n = FakeCores(); n > 0) return static_cast<int>(n);
  static auto real = Real<int (*)()>("get_nprocs");
  return real();
}

int get_nprocs_conf() {
  if (const long n = FakeCores(); n > 0) return static_cast<int>(n);
  static auto real = Real<int (*)()>("get_nprocs_conf");
  return real();
}

}  // extern "C"
