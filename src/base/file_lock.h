// An advisory lock (flock) on a file of the agent's own, for what two of its
// processes on one node share: the DRA checkpoint during a rolling update,
// and which of them publishes. The kernel drops the lock when its process
// dies, however it dies. Two FileLocks on one path conflict even within one
// process (each is its own open file).
//
// Thread-compatible: one thread at a time takes and releases it.
#ifndef GPU_AGENT_BASE_FILE_LOCK_H_
#define GPU_AGENT_BASE_FILE_LOCK_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpu_agent {

class FileLock {
 public:
  // Opens (or makes, mode 0600) the lock file at `path`, in a folder the
  // caller has checked (CheckTrustedFolder). A link, FIFO or anything but a
  // regular file there is refused, naming it.
  static absl::StatusOr<std::unique_ptr<FileLock>> Open(const std::string& path);
  // Opens the lock file at `path` only if it exists, read-only: to ask
  // whether someone holds it (TryLock) without making it again once its
  // owner removed it, and without the close that ends a write (an inotify
  // IN_CLOSE_WRITE) that another instance may be watching for.
  static absl::StatusOr<std::unique_ptr<FileLock>> OpenExisting(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Takes the lock, waiting for its holder to let go. Errors name the file.
  absl::Status Lock();
  // Takes the lock if no one holds it.
  bool TryLock();
  void Unlock();
  bool held() const { return held_; }
  // The inode of the file it opened (to tell it from one made since at
  // the same path).
  ino_t inode() const { return inode_; }
  const std::string& path() const { return path_; }

 private:
  // The lock file at `path` opened with `flags` (and never through a link),
  // a regular file.
  static absl::StatusOr<std::unique_ptr<FileLock>> OpenWith(const std::string& path, int flags);
  FileLock(std::string path, int fd, ino_t inode)
      : path_(std::move(path)), fd_(fd), inode_(inode) {}
  const std::string path_;
  const int fd_;
  const ino_t inode_;
  bool held_ = false;
};

// Holds `lock` (when not null) for a scope.
class FileLockHolder {
 public:
  explicit FileLockHolder(FileLock* lock);
  ~FileLockHolder();
  FileLockHolder(const FileLockHolder&) = delete;
  FileLockHolder& operator=(const FileLockHolder&) = delete;
  // The error taking it, if any (the scope then runs without it).
  const absl::Status& status() const { return status_; }

 private:
  FileLock* const lock_;
  absl::Status status_;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_FILE_LOCK_H_
