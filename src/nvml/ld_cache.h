// Reads the dynamic loader's cache (/etc/ld.so.cache) of a root: where that
// root's libraries are, as its own loader would find them. The NVIDIA
// driver is not always in a distribution's library folders (a driver
// container's /usr/local/nvidia/lib64, say); a root's cache says where.
#ifndef GPU_AGENT_NVML_LD_CACHE_H_
#define GPU_AGENT_NVML_LD_CACHE_H_

#include <string>
#include <string_view>
#include <vector>

namespace gpu_agent::nvml {

struct LdCacheEntry {
  std::string soname;  // "libnvidia-ml.so.1"
  std::string path;    // as the root sees it: "/usr/local/nvidia/lib64/libnvidia-ml.so.1"
};

// The entries of `file` (glibc's format "glibc-ld.so.cache1.1", alone or
// after the old "ld.so-1.7.0" table) for this machine's architecture. A
// missing, truncated or foreign file gives what could be read, or nothing,
// with `*error` saying why; it never reads outside the file.
std::vector<LdCacheEntry> ReadLdCache(const std::string& file, std::string* error = nullptr);

// The same, from the bytes of such a file.
std::vector<LdCacheEntry> ParseLdCache(std::string_view data, std::string* error = nullptr);

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_NVML_LD_CACHE_H_
