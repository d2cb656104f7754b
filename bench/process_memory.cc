#include "process_memory.h"

#include <filesystem>
#include <limits>
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

double Mib(long kib) {
  return kib < 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(kib) / 1024.0;
}

std::map<std::string, long> ThreadSwitches(pid_t pid) {
  std::map<std::string, long> switches;
  const std::string base = "/proc/" + std::to_string(pid);
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(base + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::istringstream in(ReadFile(it->path().string() + "/status"));
    long n = 0;
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("voluntary_ctxt_switches:", 0) == 0) n += std::stol(l.substr(24));
      if (l.rfind("nonvoluntary_ctxt_switches:", 0) == 0) n += std::stol(l.substr(27));
    }
    std::string name = ReadFile(it->path().string() + "/comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    switches[name + "/" + it->path().filename().string()] = n;
  }
  return switches;
}

double WakeupsPerSecond(pid_t pid, std::chrono::seconds window,
                        std::map<std::string, double>* per_thread) {
  const std::map<std::string, long> before = ThreadSwitches(pid);
  MeasurementWindow(window);
  const std::map<std::string, long> after = ThreadSwitches(pid);
  if (before.empty() || after.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double seconds = static_cast<double>(window.count());
  long total = 0;
  for (const auto& [thread, n] : after) {
    auto it = before.find(thread);
    const long d = n - (it == before.end() ? 0 : it->second);
    total += d;
    if (per_thread != nullptr) (*per_thread)[thread] = static_cast<double>(d) / seconds;
  }
  return static_cast<double>(total) / seconds;
}

}  // namespace gpu_agent::testing
