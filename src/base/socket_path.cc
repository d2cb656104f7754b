#include "base/socket_path.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

static_assert(kMaxSocketPath < sizeof(sockaddr_un::sun_path));

std::string Folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

bool SomeoneServes(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) return false;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

absl::Status PrepareSocketPath(const std::string& path, std::string_view settings) {
  if (path.size() > kMaxSocketPath) {
    return absl::InvalidArgumentError(StrCat("socket path \"", path, "\" is ", path.size(),
                                             " bytes; gRPC serves a unix socket of at most ",
                                             kMaxSocketPath, ". Use a shorter ", settings));
  }
  const std::string folder = Folder(path);
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        StrCat("socket folder \"", folder, "\" does not exist (", std::strerror(errno),
               "); is the kubelet's folder mounted into this container?"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(StrCat("\"", folder, "\" is not a folder"));
  }
  if (absl::Status s = CheckTrustedFolder(folder, "socket folder"); !s.ok()) return s;
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(StrCat("socket folder \"", folder,
                                                "\" is not writable by this process (",
                                                std::strerror(errno), ")"));
  }
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          StrCat("\"", path, "\" exists and is not a socket; refusing to replace it"));
    }
    if (SomeoneServes(path)) {
      return absl::FailedPreconditionError(
          StrCat("socket \"", path,
                 "\" is served by another live process (another gpu-agent, or NVIDIA's "
                 "plugin or driver, for the same resource?)"));
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::FailedPreconditionError(
          StrCat("cannot remove stale socket \"", path, "\": ", std::strerror(errno)));
    }
    LogInfo("removed stale socket", {{"path", path}});
  }
  return absl::OkStatus();
}

absl::Status SecureSocket(const std::string& path) {
  // gRPC binds with the process's umask (0077 in gpu-agent); the mode is set
  // here whatever it was: the kubelet, which runs as root, is the only peer.
  if (::chmod(path.c_str(), 0600) != 0) {
    return absl::FailedPreconditionError(
        StrCat("cannot set the mode of socket \"", path, "\": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace gpu_agent
