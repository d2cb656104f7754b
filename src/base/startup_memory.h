// Hands back, once a mode has started, the memory an idle agent holds only
// because it once started: the resident pages of its code (the executable's
// and each library's text) and heap that start-up freed. gRPC's server
// start-up, OpenSSL's string tables (loaded before main by Debian's shared
// cpp-httplib) and the config parsing touch most of an idle agent's VmRSS,
// and none of that code runs again while it serves.
#ifndef GPU_AGENT_BASE_STARTUP_MEMORY_H_
#define GPU_AGENT_BASE_STARTUP_MEMORY_H_

#include <cstddef>

namespace gpu_agent {

// Advises the kernel that the process no longer needs the pages of its
// read-only file mappings (MADV_DONTNEED on each r-xp and r--p mapping of a
// file that holds no private copy of a page, `Anonymous: 0` in smaps: code
// and read-only data, never written, so each page is read back from the
// page cache, where it stays, at its next use), then returns free heap to
// the kernel (malloc_trim). Does nothing under a debugger or tracer
// (TracerPid set): its breakpoints live in private copies of code pages.
// Returns the bytes of mappings advised.
size_t ReleaseStartupMemory();

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_STARTUP_MEMORY_H_
