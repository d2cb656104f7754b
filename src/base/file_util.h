// Small file-system queries shared by the modules.
#ifndef GPU_AGENT_BASE_FILE_UTIL_H_
#define GPU_AGENT_BASE_FILE_UTIL_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpu_agent {

// True when something (of any type) exists at `path`; links are followed.
bool PathExists(const std::string& path);
// The inode of the file at `path` itself (links not followed); 0 if none.
ino_t InodeOf(const std::string& path);
// `root` + `path` with one '/' between: ("/run/driver/", "/dev/x") ->
// "/run/driver/dev/x"; root "/" or "" leaves `path`.
std::string JoinRoot(std::string_view root, std::string_view path);
// A root folder without its trailing '/'s, "/" staying "/" and "" becoming
// "/": the one spelling two roots are compared by.
std::string TrimRoot(std::string_view root);
// Whether two roots name the same folder as written ("/run/d/" and "/run/d").
bool SameRoot(std::string_view a, std::string_view b);

// How far a write must have gone before WriteFileAtomically returns.
enum class Durability {
  // The new content is on the disk before it is renamed over `path`
  // (fsync): a crash of the machine leaves the old file or the new one.
  kFlushed,
  // Renamed over `path` without waiting for the disk: readers, and a
  // restarted process, see the old file or the new one; after a crash of
  // the machine the file may be missing or empty. For files a flushed
  // record lets the writer check and write again.
  kRenamedOnly,
};

// Replaces (or creates) `path` with `content`, mode 0644, so a reader sees
// the old file or the new one, never a part: written to a temporary file in
// the same folder, flushed as `durability` asks, then renamed over `path`.
// The folder must exist. Errors name the path and the system's reason; no
// temporary file is left.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 Durability durability = Durability::kFlushed);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_FILE_UTIL_H_
