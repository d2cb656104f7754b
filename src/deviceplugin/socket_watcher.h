// Watches the kubelet's device-plugins folder with inotify, so a kubelet
// restart (a new kubelet.sock) or a removed plugin socket is seen at once,
// without polling. One thread blocks in poll(2); an eventfd wakes it to stop.
#ifndef GPU_AGENT_DEVICEPLUGIN_SOCKET_WATCHER_H_
#define GPU_AGENT_DEVICEPLUGIN_SOCKET_WATCHER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace gpu_agent::deviceplugin {

class SocketWatcher {
 public:
  // kOverflow: the kernel's queue overflowed and events were lost (the name
  // is empty); the owner must look at the folder itself.
  enum class Change { kCreated, kDeleted, kOverflow };
  // Called on the watcher's thread with a file name in the folder.
  using Callback = std::function<void(const std::string& name, Change change)>;

  static absl::StatusOr<std::unique_ptr<SocketWatcher>> Start(const std::string& folder,
                                                              Callback callback);
  ~SocketWatcher();  // stops and joins the thread

 private:
  SocketWatcher(int inotify_fd, int wake_fd, Callback callback);
  void Loop();

  const int inotify_fd_;
  const int wake_fd_;
  const Callback callback_;
  std::thread thread_;
};

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_SOCKET_WATCHER_H_
