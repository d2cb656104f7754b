// Small file-system queries shared by the modules.
#ifndef GPU_AGENT_BASE_FILE_UTIL_H_
#define GPU_AGENT_BASE_FILE_UTIL_H_

#include <sys/types.h>

#include <string>
#include <string_view>

namespace gpu_agent {

// True when something (of any type) exists at `path`; links are followed.
bool PathExists(const std::string& path);
// The inode of the file at `path` itself (links not followed); 0 if none.
ino_t InodeOf(const std::string& path);
// `root` + `path` with one '/' between: ("/run/driver/", "/dev/x") ->
// "/run/driver/dev/x"; root "/" or "" leaves `path`.
std::string JoinRoot(std::string_view root, std::string_view path);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_FILE_UTIL_H_
