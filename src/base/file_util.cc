#include "base/file_util.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
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

namespace {

// A name no one can guess in `dir`: ".<base>.tmp-<16 hex digits>" (a
// leading dot: readers that pick files by extension, as CDI consumers take
// *.json and *.yaml, never see the half-written one).
std::string TemporaryName(const std::string& dir, const std::string& base) {
  uint64_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
    // No entropy yet: the clock and the pid still make a name no one
    // planted in advance; O_EXCL refuses one that exists.
    r = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<uint64_t>(::getpid()) << 40);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, r);
  return StrCat(dir, ".", base, ".tmp-", hex);
}

bool WriteAll(int fd, std::string_view content) {
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 Durability durability, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  // O_CREAT | O_EXCL under a name no one can guess: a file or link planted
  // in the folder is never opened, let alone followed (a link at a
  // predictable name once made the agent write through it as root).
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = TemporaryName(dir, base);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return WriteError(path, "creating a temporary file in its folder");
  auto fail = [&](const char* step) {
    absl::Status s = WriteError(path, step);
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  if (!WriteAll(fd, content)) return fail("writing");
  // Created 0600 (never readable by others half-written); then the mode
  // asked, whatever the umask.
  if (::fchmod(fd, mode) != 0) return fail("setting its mode");
  if (durability == Durability::kFlushed && ::fsync(fd) != 0) return fail("flushing");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("closing");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("renaming the temporary file over it");
  if (durability == Durability::kFlushed) {
    // The rename itself on the disk: a crash must not bring the old file back.
    const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = d >= 0 && ::fsync(d) == 0;
    const int err = errno;
    if (d >= 0) ::close(d);
    errno = err;
    if (!synced) return WriteError(path, "flushing its folder after the rename");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileBounded(const std::string& path, size_t max_bytes,
                                            Links links) {
  auto error = [&](std::string_view why) {
    const int err = errno;
    const std::string what = StrCat("cannot read \"", path, "\": ", why);
    if (err == ENOENT) return absl::NotFoundError(what);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(what);
    return absl::FailedPreconditionError(what);
  };
  // O_NONBLOCK: a FIFO planted at the path must not block the open (a
  // writer never comes); it is then refused as not a regular file.
  const int flags =
      O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (links == Links::kRefuse ? O_NOFOLLOW : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    if (errno == ELOOP && links == Links::kRefuse) {
      return absl::FailedPreconditionError(
          StrCat("cannot read \"", path, "\": it is a symbolic link, which is not followed here"));
    }
    return error(std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return error(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    errno = 0;
    return absl::FailedPreconditionError(StrCat("cannot read \"", path, "\": it is ",
                                                S_ISDIR(st.st_mode)    ? "a folder"
                                                : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)
                                                    ? "a device"
                                                : S_ISSOCK(st.st_mode) ? "a socket"
                                                                       : "not a regular file",
                                                ", not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::InvalidArgumentError(StrCat("cannot read \"", path, "\": it holds ", st.st_size,
                                             " bytes, over the ", max_bytes, "-byte limit"));
  }
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  // One byte past the cap: a file that grew since fstat is refused too.
  char more[4096];
  for (;;) {
    const bool into_out = got < out.size();
    const ssize_t n =
        into_out ? ::read(fd, out.data() + got, out.size() - got) : ::read(fd, more, sizeof more);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error(std::strerror(errno));
    if (n == 0) break;
    if (into_out) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return absl::InvalidArgumentError(StrCat("cannot read \"", path, "\": it grew past the ",
                                               max_bytes, "-byte limit while being read"));
    }
    out.append(more, static_cast<size_t>(n));
    got = out.size();
  }
  out.resize(got);
  return out;
}

absl::Status CheckTrustedFolder(const std::string& dir, std::string_view what) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        StrCat(what, ": cannot use the folder \"", dir, "\": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(StrCat(what, ": \"", dir, "\" is not a folder"));
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) {
    return absl::FailedPreconditionError(
        StrCat(what, ": the folder \"", dir, "\" belongs to user ", st.st_uid,
               ", neither root nor the agent's user (", me,
               "); another user's folder could hold files or links planted where the agent "
               "writes"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return absl::FailedPreconditionError(
        StrCat(what, ": the folder \"", dir, "\" (mode ", mode,
               ") can be written by other users, who could plant files or links where the agent "
               "writes; make it writable by its owner only (chmod go-w)"));
  }
  return absl::OkStatus();
}

namespace {

// Makes the folder `path` with exactly `mode` (whatever the umask) unless
// something is there already; the mode is set on the folder made, through
// a descriptor, never through a link put in its place since.
absl::Status MakeOneFolder(const std::string& path, mode_t mode, std::string_view what) {
  if (::mkdir(path.c_str(), mode) != 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return absl::FailedPreconditionError(
        StrCat(what, ": cannot create \"", path, "\": ", std::strerror(errno)));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  const bool set = fd >= 0 && ::fchmod(fd, mode) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!set) {
    return absl::FailedPreconditionError(
        StrCat(what, ": cannot set the mode of \"", path, "\": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeTrustedFolder(const std::string& dir_in, mode_t mode, std::string_view what) {
  // "/var/run/cdi/" names the folder "/var/run/cdi", which gets `mode`.
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::FailedPreconditionError(
          StrCat(what, ": cannot use the folder \"", dir, "\": ", std::strerror(errno)));
    }
    // The missing parents 0755, as `mkdir -p` makes them under the usual
    // umask (this process's is 077); the folder itself with `mode`.
    for (size_t slash = dir.find('/', 1); slash != std::string::npos;
         slash = dir.find('/', slash + 1)) {
      if (absl::Status s = MakeOneFolder(dir.substr(0, slash), 0755, what); !s.ok()) return s;
    }
    if (absl::Status s = MakeOneFolder(dir, mode, what); !s.ok()) return s;
  }
  return CheckTrustedFolder(dir, what);
}

absl::Status WriteError(const std::string& path, std::string_view step) {
  const int err = errno;
  return absl::Status(err == EACCES || err == EPERM || err == EROFS
                          ? absl::StatusCode::kPermissionDenied
                          : absl::StatusCode::kFailedPrecondition,
                      StrCat("cannot write ", path, ": ", step, ": ", std::strerror(err)));
}

std::string TrimRoot(std::string_view root) {
  while (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
  return root.empty() ? "/" : std::string(root);
}

bool SameRoot(std::string_view a, std::string_view b) { return TrimRoot(a) == TrimRoot(b); }

}  // namespace gpu_agent
