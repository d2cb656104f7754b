// A memory cgroup of one process's own, made and removed by a benchmark, for
// the figure a kubelet reads for a pod: its working set (cAdvisor's
// container_memory_working_set_bytes), the cgroup's memory usage less its
// inactive file pages. Unlike the process's resident set it keeps counting
// file pages the process has dropped from its page tables while the page
// cache still holds them charged to the cgroup.
#ifndef GPU_AGENT_BENCH_MEMORY_CGROUP_H_
#define GPU_AGENT_BENCH_MEMORY_CGROUP_H_

#include <memory>
#include <string>
#include <vector>

namespace gpu_agent::testing {

class MemoryCgroup {
 public:
  // Makes a child cgroup named `name` under this process's own memory cgroup:
  // cgroup v1's memory hierarchy (/sys/fs/cgroup/memory), else cgroup2
  // (/sys/fs/cgroup/unified or /sys/fs/cgroup) where its memory controller
  // is enabled for children. A child keeps the process under whatever limit
  // holds this one. nullptr and `*why_not` when neither can be made
  // (not root, no memory controller, a read-only cgroup filesystem).
  static std::unique_ptr<MemoryCgroup> Create(const std::string& name, std::string* why_not);

  // Removes the cgroup. REQUIRES: every process started in it has exited
  // and been waited for; otherwise says so on stderr and leaves it.
  ~MemoryCgroup();

  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;

  // `argv` (argv[0] a path) run through /bin/sh, which joins the cgroup and
  // then execs it: every page the program touches is charged here from its
  // first instruction, and its pid is the shell's.
  std::vector<std::string> Wrap(const std::vector<std::string>& argv) const;

  // Usage less inactive file pages, in KiB, as cAdvisor computes it
  // (v1: memory.usage_in_bytes - total_inactive_file; v2: memory.current -
  // inactive_file); -1 when unreadable.
  long WorkingSetKib() const;

  // The whole charge, page cache included (v1: memory.usage_in_bytes; v2:
  // memory.current), in KiB; -1 when unreadable. What counts against a
  // pod's limit until reclaimed.
  long UsageKib() const;

  // The kernel's socket buffers charged to the cgroup, in KiB: v2's "sock"
  // of memory.stat (part of memory.current, so of what a limit holds to);
  // v1's memory.kmem.tcp.usage_in_bytes, which v1 counts only once
  // CountSockets() has run. -1 when unreadable.
  long SocketKib() const;
  // v1: turns on the TCP buffer accounting (a limit far above any use) for
  // sockets made after it; v2 always counts them. False if it cannot.
  bool CountSockets() const;

  // "cgroup v1" or "cgroup v2", and the folder.
  const std::string& kind() const { return kind_; }
  const std::string& path() const { return path_; }

 private:
  MemoryCgroup(std::string kind, std::string path, bool v2)
      : kind_(std::move(kind)), path_(std::move(path)), v2_(v2) {}

  // Constant after construction.
  const std::string kind_;
  const std::string path_;
  const bool v2_;
};

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_BENCH_MEMORY_CGROUP_H_
