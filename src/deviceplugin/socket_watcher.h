// Watches the kubelet's device-plugins folder with inotify, so a kubelet
// restart (a new kubelet.sock) or a removed plugin socket is seen at once,
// without polling the folder. It has no thread of its own: the owner polls
// fd() beside whatever else it waits on and calls Drain when it is readable
// (the supervisor's control thread does).
#ifndef GPU_AGENT_DEVICEPLUGIN_SOCKET_WATCHER_H_
#define GPU_AGENT_DEVICEPLUGIN_SOCKET_WATCHER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpu_agent::deviceplugin {

class SocketWatcher {
 public:
  // kOverflow: the kernel's queue overflowed and events were lost (the name
  // is empty); the owner must look at the folder itself.
  enum class Change { kCreated, kDeleted, kOverflow };
  // Called from Drain with a file name in the folder.
  using Callback = std::function<void(const std::string& name, Change change)>;

  static absl::StatusOr<std::unique_ptr<SocketWatcher>> Open(const std::string& folder);
  ~SocketWatcher();  // closes the inotify descriptor
  SocketWatcher(const SocketWatcher&) = delete;
  SocketWatcher& operator=(const SocketWatcher&) = delete;

  // Readable (POLLIN) when changes wait to be drained.
  int fd() const { return inotify_fd_; }
  // Reads every waiting change, without blocking, and reports each.
  void Drain(const Callback& callback);

 private:
  explicit SocketWatcher(int inotify_fd) : inotify_fd_(inotify_fd) {}

  const int inotify_fd_;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_SOCKET_WATCHER_H_
