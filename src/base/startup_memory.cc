#include "base/startup_memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace gpu_agent {
namespace {

bool Traced() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("TracerPid:", 0) == 0) return std::stol(line.substr(10)) != 0;
  }
  return false;
}

}  // namespace

size_t ReleaseStartupMemory() {
  if (Traced()) return 0;
  std::ifstream smaps("/proc/self/smaps");
  size_t advised = 0;
  uintptr_t start = 0, end = 0;
  bool candidate = false;
  auto advise = [&] {
    if (candidate && end > start &&
        ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) == 0) {
      advised += end - start;
    }
    candidate = false;
  };
  for (std::string line; std::getline(smaps, line);) {
    if (line.rfind("Anonymous:", 0) == 0) {
      // A private copy of a page (RELRO after relocation, a breakpoint)
      // would be lost: leave such a mapping alone.
      if (std::stol(line.substr(10)) != 0) candidate = false;
      continue;
    }
    if (line.empty() || !std::isxdigit(static_cast<unsigned char>(line[0])) ||
        line.find('-') == std::string::npos || line.find(':') < line.find(' ')) {
      continue;
    }
    // A mapping's header: "start-end perms offset dev inode path".
    advise();
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode >> path;
    const size_t dash = range.find('-');
    start = std::stoull(range.substr(0, dash), nullptr, 16);
    end = std::stoull(range.substr(dash + 1), nullptr, 16);
    // Read-only pages of a file, never written: each comes back from the
    // page cache. Not the kernel's [vdso]/[vsyscall] pages.
    candidate = (perms == "r-xp" || perms == "r--p") && !path.empty() && path[0] == '/';
  }
  advise();
  ::malloc_trim(0);
  return advised;
}

}  // namespace gpu_agent
