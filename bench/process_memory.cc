#include "process_memory.h"

#include <sstream>
#include <string>

#include "support/test_support.h"

namespace gpu_agent::testing {
namespace {

// The value of "<field>:   123 kB" lines in `text`; -1 when absent.
long FieldKib(const std::string& text, const std::string& field) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

}  // namespace

ProcessMemory ReadProcessMemory(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string status = ReadFile(base + "/status");
  ProcessMemory m;
  m.rss_anon_kib = FieldKib(status, "RssAnon");
  m.hwm_kib = FieldKib(status, "VmHWM");
  m.rss_kib = FieldKib(status, "VmRSS");
  m.pss_kib = FieldKib(ReadFile(base + "/smaps_rollup"), "Pss");
  return m;
}

}  // namespace gpu_agent::testing
