#include "memory_cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/test_support.h"

namespace gpu_agent::testing {
namespace {

// This process's cgroup in the hierarchy whose /proc/self/cgroup line has
// `controllers` ("memory" for v1, "" for cgroup2), e.g. "/a/b"; "" if none.
std::string OwnCgroup(const std::string& controllers) {
  std::istringstream in(ReadFile("/proc/self/cgroup"));
  for (std::string line; std::getline(in, line);) {
    // "<id>:<controllers>:<path>"
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::istringstream list(line.substr(a + 1, b - a - 1));
    bool match = controllers.empty() && b == a + 1;
    for (std::string c; !match && std::getline(list, c, ',');) match = c == controllers;
    if (match) {
      const std::string path = line.substr(b + 1);
      return path == "/" ? "" : path;
    }
  }
  return "";
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The number after "<key> " at the start of a line of a memory.stat; -1.
long long StatValue(const std::string& stat, const std::string& key) {
  std::istringstream in(stat);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + " ", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

long long FileValue(const std::string& path) {
  const std::string text = ReadFile(path);
  if (text.empty()) return -1;
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    return -1;  // "max" or garbage
  }
}

// mkdir `parent`/`name`; "" on success, else why not.
std::string MakeChild(const std::string& parent, const std::string& name) {
  if (::mkdir((parent + "/" + name).c_str(), 0755) != 0 && errno != EEXIST) {
    return "mkdir " + parent + "/" + name + ": " + std::strerror(errno);
  }
  return "";
}

}  // namespace

std::unique_ptr<MemoryCgroup> MemoryCgroup::Create(const std::string& name, std::string* why_not) {
  std::string v1_why, v2_why;
  // cgroup v1: the memory hierarchy, which may coexist with a cgroup2
  // mount that then has no memory controller.
  const std::string v1_root = "/sys/fs/cgroup/memory";
  if (IsDir(v1_root) && ::access((v1_root + "/memory.stat").c_str(), R_OK) == 0) {
    const std::string parent = v1_root + OwnCgroup("memory");
    v1_why = MakeChild(parent, name);
    if (v1_why.empty()) {
      return std::unique_ptr<MemoryCgroup>(
          new MemoryCgroup("cgroup v1", parent + "/" + name, /*v2=*/false));
    }
  } else {
    v1_why = "no cgroup v1 memory hierarchy at " + v1_root;
  }
  // cgroup2: unified beside v1 (hybrid), or the only hierarchy.
  const std::string v2_root =
      IsDir("/sys/fs/cgroup/unified") ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
  if (::access((v2_root + "/cgroup.controllers").c_str(), R_OK) == 0) {
    const std::string parent = v2_root + OwnCgroup("");
    const std::string enabled = " " + ReadFile(parent + "/cgroup.subtree_control") + " ";
    if (enabled.find("memory") == std::string::npos) {
      v2_why = "cgroup2 at " + parent + " does not enable the memory controller for children";
    } else {
      v2_why = MakeChild(parent, name);
      if (v2_why.empty()) {
        return std::unique_ptr<MemoryCgroup>(
            new MemoryCgroup("cgroup v2", parent + "/" + name, /*v2=*/true));
      }
    }
  } else {
    v2_why = "no cgroup2 hierarchy at " + v2_root;
  }
  *why_not = v1_why + "; " + v2_why;
  return nullptr;
}

MemoryCgroup::~MemoryCgroup() {
  if (::rmdir(path_.c_str()) != 0) {
    std::fprintf(stderr, "could not remove the bench's cgroup %s: %s\n", path_.c_str(),
                 std::strerror(errno));
  }
}

std::vector<std::string> MemoryCgroup::Wrap(const std::vector<std::string>& argv) const {
  std::vector<std::string> wrapped = {"/bin/sh", "-c",
                                      "echo $$ > \"$0\"/cgroup.procs && exec \"$@\"", path_};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

long MemoryCgroup::UsageKib() const {
  const long long usage = FileValue(path_ + (v2_ ? "/memory.current" : "/memory.usage_in_bytes"));
  return usage < 0 ? -1 : static_cast<long>(usage / 1024);
}

long MemoryCgroup::WorkingSetKib() const {
  const std::string stat = ReadFile(path_ + "/memory.stat");
  const long long usage = FileValue(path_ + (v2_ ? "/memory.current" : "/memory.usage_in_bytes"));
  const long long inactive = StatValue(stat, v2_ ? "inactive_file" : "total_inactive_file");
  if (usage < 0 || inactive < 0) return -1;
  // cAdvisor: a working set never below 0.
  return static_cast<long>((usage > inactive ? usage - inactive : 0) / 1024);
}

long MemoryCgroup::SocketKib() const {
  const long long bytes = v2_ ? StatValue(ReadFile(path_ + "/memory.stat"), "sock")
                              : FileValue(path_ + "/memory.kmem.tcp.usage_in_bytes");
  return bytes < 0 ? -1 : static_cast<long>(bytes / 1024);
}

bool MemoryCgroup::CountSockets() const {
  if (v2_) return true;
  std::ofstream limit(path_ + "/memory.kmem.tcp.limit_in_bytes");
  limit << (1LL << 40) << "\n";
  limit.flush();
  return static_cast<bool>(limit);
}

}  // namespace gpu_agent::testing
