// Which of a driver's instances on a node publishes its ResourceSlices and
// serves its health stream, so a rolling update (the DaemonSet's maxSurge:
// a new pod beside the old one) moves them to the new instance without a
// gap and without two publishers fighting over the slices.
//
// Files in the driver's plugin folder, each flock'd as the kernel keeps
// locks (dropped when their process dies, however it dies):
//  - instance-<id>.lock: held by each instance for its life, so another
//    can tell whether it is still there;
//  - publisher.lock: held by the instance that publishes;
//  - takeover: the id of the instance started last, renamed into place;
//  - released: written by an instance as it lets go of publisher.lock.
// An instance publishes while it holds publisher.lock and the takeover
// file names it, or names an instance no longer there (a file left from
// before a reboot, a pod long gone). A starting instance names itself in
// the takeover file; the publishing one sees that (inotify), `yield`s,
// lets go of the lock and writes released, which wakes the newcomer to
// take it and `lead`. An instance that is not publishing wakes for those
// two files renamed into place (nothing else) and once a `retry`, and tries
// the lock: when the publisher goes, one that is left takes over. One that
// is stopped stops publishing (`yield`) before it lets go, so two never
// publish at once. The newest that cannot publish (`lead` false) lets go; an
// older one stands in until the newest, after a growing wait, asks again.
#ifndef GPU_AGENT_DRA_HANDOVER_H_
#define GPU_AGENT_DRA_HANDOVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpu_agent::dra {

struct HandoverOptions {
  std::string folder;  // the driver's plugin folder, trusted (MakeTrustedFolder)
  std::string id;      // this instance: the pod UID, or a name unique on the node
  // Run on the handover's thread (the first `lead` on Start's caller's,
  // the last `yield` on Stop's): `lead` when this instance starts
  // publishing, false when it cannot (then it lets go, for another instance
  // to try, and tries again after a growing wait); `yield` before it stops,
  // because a newer one asked or it is stopped. Neither runs after Stop
  // returns.
  std::function<bool()> lead;
  std::function<void()> yield;
  // How often an instance that does not publish tries the lock, besides
  // every change in the folder.
  std::chrono::milliseconds retry{1000};
};

class Handover {
 public:
  // Asks for the takeover and, when no one holds the lock, takes it at
  // once (`lead` runs before Start returns); otherwise the holder's
  // handover or its end makes this instance lead later. Errors: the lock
  // file or the inotify watch cannot be made.
  static absl::StatusOr<std::unique_ptr<Handover>> Start(HandoverOptions options);
  ~Handover();  // Stop()

  // Ends the thread, `yield`s if leading, then lets go of the lock: a
  // standing-by instance takes it, after this one stopped publishing.
  // Idempotent.
  void Stop();

  bool leading() const;

  class Impl;

 private:
  explicit Handover(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_HANDOVER_H_
