#include "base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/strings.h"

namespace gpu_agent {

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::string JoinRoot(std::string_view root, std::string_view path) {
  while (!root.empty() && root.back() == '/') root.remove_suffix(1);
  return std::string(root) + std::string(path);
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 Durability durability) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  // A leading dot: readers that pick files by extension (CDI consumers take
  // *.json and *.yaml) never see the half-written one.
  const std::string tmp = StrCat(dir, ".", base, ".tmp-", ::getpid());
  auto fail = [&](const char* step) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::Status(err == EACCES || err == EPERM || err == EROFS
                            ? absl::StatusCode::kPermissionDenied
                            : absl::StatusCode::kFailedPrecondition,
                        StrCat("cannot write ", path, ": ", step, ": ", std::strerror(err)));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("creating a temporary file in its folder");
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      return fail("writing");
    }
    done += static_cast<size_t>(n);
  }
  // The umask may have taken bits off; readers (container runtimes) need 0644.
  if (::fchmod(fd, 0644) != 0 || (durability == Durability::kFlushed && ::fsync(fd) != 0)) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return fail("flushing");
  }
  if (::close(fd) != 0) return fail("closing");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("renaming the temporary file over it");
  return absl::OkStatus();
}

std::string TrimRoot(std::string_view root) {
  while (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
  return root.empty() ? "/" : std::string(root);
}

bool SameRoot(std::string_view a, std::string_view b) { return TrimRoot(a) == TrimRoot(b); }

}  // namespace gpu_agent
