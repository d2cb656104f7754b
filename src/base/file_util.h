// Small file-system queries shared by the modules.
#ifndef GPU_AGENT_BASE_FILE_UTIL_H_
#define GPU_AGENT_BASE_FILE_UTIL_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

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
  // (fsync), and the rename is on the disk before the call returns (the
  // folder fsynced): a crash of the machine leaves the old file or the new
  // one, and the new one once the call has returned.
  kFlushed,
  // Renamed over `path` without waiting for the disk: readers, and a
  // restarted process, see the old file or the new one; after a crash of
  // the machine the file may be missing or empty. For files a flushed
  // record lets the writer check and write again.
  kRenamedOnly,
};

// Replaces (or creates) `path` with `content`, with exactly `mode` (the
// umask does not apply), so a reader sees the old file or the new one, never
// a part: written to a temporary file in the same folder under a name no one
// can guess, created with O_EXCL (nothing planted there is opened or
// followed), flushed as `durability` asks, then renamed over `path` (a link
// at `path` is replaced, not followed). The folder must exist. Errors name
// the path and the system's reason; no temporary file is left.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 Durability durability = Durability::kFlushed, mode_t mode = 0644);

// Whether ReadFileBounded follows a symbolic link at the path itself.
enum class Links {
  kFollow,  // files a Kubernetes volume mounts (a projected token is a link)
  kRefuse,  // files in a folder the agent writes (its checkpoint, its specs)
};

// The content of the regular file at `path`, of at most `max_bytes`. A FIFO
// (opened without blocking), a device, a folder or a longer file is an error
// naming the path and why: NotFound, PermissionDenied, InvalidArgument (too
// long) or FailedPrecondition (anything else).
absl::StatusOr<std::string> ReadFileBounded(const std::string& path, size_t max_bytes,
                                            Links links = Links::kFollow);

// Whether the agent may keep its files in `dir`: a folder (links to it
// followed), owned by root or by the agent's user, that no other user can
// write (no group or other write bit), or another user could plant a file
// or link under a name the agent writes. Errors start with `what` (the
// setting that names the folder) and say how to fix it.
absl::Status CheckTrustedFolder(const std::string& dir, std::string_view what);

// Makes `dir` when missing (its parents as `mkdir -p` does, the folder
// itself with exactly `mode`), then checks it as CheckTrustedFolder does.
absl::Status MakeTrustedFolder(const std::string& dir, mode_t mode, std::string_view what);

// The error of a failed write to `path` at `step`, from errno: "cannot write
// <path>: <step>: <reason>", PermissionDenied where the system said so
// (EACCES, EPERM, EROFS), else FailedPrecondition.
absl::Status WriteError(const std::string& path, std::string_view step);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_FILE_UTIL_H_
