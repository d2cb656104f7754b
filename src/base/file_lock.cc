#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/strings.h"

namespace gpu_agent {

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::Open(const std::string& path) {
  return OpenWith(path, O_RDWR | O_CREAT);
}

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::OpenExisting(const std::string& path) {
  return OpenWith(path, O_RDONLY);
}

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::OpenWith(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        StrCat("cannot open the lock file ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        StrCat("the lock file ", path, " is not a regular file; remove it"));
  }
  return std::unique_ptr<FileLock>(new FileLock(path, fd, st.st_ino));
}

FileLock::~FileLock() { ::close(fd_); }

absl::Status FileLock::Lock() {
  if (held_) return absl::OkStatus();
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    return absl::UnavailableError(StrCat("cannot lock ", path_, ": ", std::strerror(errno)));
  }
  held_ = true;
  return absl::OkStatus();
}

bool FileLock::TryLock() {
  if (held_) return true;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EINTR) return false;
  }
  held_ = true;
  return true;
}

void FileLock::Unlock() {
  if (!held_) return;
  ::flock(fd_, LOCK_UN);
  held_ = false;
}

FileLockHolder::FileLockHolder(FileLock* lock) : lock_(lock) {
  if (lock_ != nullptr) status_ = lock_->Lock();
}

FileLockHolder::~FileLockHolder() {
  if (lock_ != nullptr && status_.ok()) lock_->Unlock();
}

}  // namespace gpu_agent
