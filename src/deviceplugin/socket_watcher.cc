#include "deviceplugin/socket_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::deviceplugin {

absl::StatusOr<std::unique_ptr<SocketWatcher>> SocketWatcher::Start(const std::string& folder,
                                                                    Callback callback) {
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
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    ::close(in_fd);
    return absl::ResourceExhaustedError(StrCat("eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<SocketWatcher> w(new SocketWatcher(in_fd, wake_fd, std::move(callback)));
  w->thread_ = std::thread([p = w.get()] {
    NameThisThread("socket-watch");
    p->Loop();
  });
  return w;
}

SocketWatcher::SocketWatcher(int inotify_fd, int wake_fd, Callback callback)
    : inotify_fd_(inotify_fd), wake_fd_(wake_fd), callback_(std::move(callback)) {}

SocketWatcher::~SocketWatcher() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(inotify_fd_);
  ::close(wake_fd_);
}

void SocketWatcher::Loop() {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LogError("socket watcher poll failed; kubelet restarts are no longer seen",
               {{"error", std::strerror(errno)}});
      return;
    }
    if (fds[1].revents & POLLIN) return;
    for (;;) {
      const ssize_t n = ::read(inotify_fd_, buf, sizeof buf);
      if (n <= 0) break;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
          callback_("", Change::kOverflow);
          continue;
        }
        if (ev->mask & IN_DELETE_SELF) {
          LogWarning("the device-plugins folder itself was removed");
          continue;
        }
        if (ev->len == 0) continue;
        const std::string name(ev->name);
        if (ev->mask & (IN_CREATE | IN_MOVED_TO)) callback_(name, Change::kCreated);
        if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) callback_(name, Change::kDeleted);
      }
    }
  }
}

}  // namespace gpu_agent::deviceplugin
