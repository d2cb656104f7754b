#include "deviceplugin/socket_watcher.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::deviceplugin {

absl::StatusOr<std::unique_ptr<SocketWatcher>> SocketWatcher::Open(const std::string& folder) {
  const int in_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (in_fd < 0) {
    return absl::ResourceExhaustedError(StrCat("inotify_init1: ", std::strerror(errno)));
  }
  if (::inotify_add_watch(in_fd, folder.c_str(),
                          IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF) <
      0) {
    const int err = errno;
    ::close(in_fd);
    return absl::FailedPreconditionError(
        StrCat("cannot watch \"", folder, "\" with inotify: ", std::strerror(err)));
  }
  return std::unique_ptr<SocketWatcher>(new SocketWatcher(in_fd));
}

SocketWatcher::~SocketWatcher() { ::close(inotify_fd_); }

void SocketWatcher::Drain(const Callback& callback) {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    const ssize_t n = ::read(inotify_fd_, buf, sizeof buf);
    if (n <= 0) return;  // EAGAIN: nothing more waits
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      p += sizeof(inotify_event) + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {
        callback("", Change::kOverflow);
        continue;
      }
      if (ev->mask & IN_DELETE_SELF) {
        LogWarning("the device-plugins folder itself was removed");
        continue;
      }
      if (ev->len == 0) continue;
      const std::string name(ev->name);
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) callback(name, Change::kCreated);
      if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) callback(name, Change::kDeleted);
    }
  }
}

}  // namespace gpu_agent::deviceplugin
