// What a process's memory costs, as /proc tells it. VmRSS is not among the
// headline figures: it counts every resident page of every file the process
// maps, whoever else shares them, and falls when pages are dropped that the
// page cache (and the pod's memory cgroup) still holds.
#ifndef GPU_AGENT_BENCH_PROCESS_MEMORY_H_
#define GPU_AGENT_BENCH_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>

namespace gpu_agent::testing {

// Each figure in KiB; -1 where it could not be read.
struct ProcessMemory {
  long rss_anon_kib = -1;  // RssAnon: private anonymous pages (heap, stacks, written data)
  long pss_kib = -1;       // Pss of smaps_rollup: resident pages, shared ones divided by sharers
  long hwm_kib = -1;       // VmHWM: the peak resident set since start
  long rss_kib = -1;       // VmRSS: for comparison with older figures only
};

// Reads /proc/<pid>/status and /proc/<pid>/smaps_rollup.
ProcessMemory ReadProcessMemory(pid_t pid);

// A figure in KiB as MiB; NaN for one not read (-1).
double Mib(long kib);

// The peak (VmHWM) budget every mode shares, issue 40's: NVIDIA's device
// plugin peaked at 15,310 kB on the same fixture and kubelet code when it
// was measured side by side (not by these benches).
inline constexpr double kPeakBudgetMib = 15.0;
inline constexpr const char* kPeakBudget = "<= 15 MiB";

// Context switches so far (voluntary and not) of each thread of `pid`, as
// "<name>/<tid>": every time a thread woke. Empty when the process is gone.
std::map<std::string, long> ThreadSwitches(pid_t pid);

// Context switches of every thread of `pid` over `window`, per second;
// `per_thread`, when given, gets each thread's ("<name>/<tid>"). NaN when
// the process was gone at either end of the window.
double WakeupsPerSecond(pid_t pid, std::chrono::seconds window,
                        std::map<std::string, double>* per_thread = nullptr);

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_BENCH_PROCESS_MEMORY_H_
