#include "dra/handover.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "base/backoff.h"
#include "base/duration.h"
#include "base/file_lock.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/poll_driven.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::dra {
namespace {

constexpr char kPublisherLock[] = "publisher.lock";
constexpr char kTakeover[] = "takeover";
constexpr char kReleased[] = "released";
constexpr size_t kMaxId = 256;

std::string InstanceLockName(const std::string& id) { return StrCat("instance-", id, ".lock"); }

// Takes the lock on `path` for good: made, opened, locked, and still the
// file at `path` once locked (another instance may remove a stale one
// between the open and the lock).
absl::StatusOr<std::unique_ptr<FileLock>> LockForLife(const std::string& path) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    absl::StatusOr<std::unique_ptr<FileLock>> lock = FileLock::Open(path);
    if (!lock.ok()) return lock.status();
    if (absl::Status s = (*lock)->Lock(); !s.ok()) return s;
    if ((*lock)->inode() == InodeOf(path)) return lock;
  }
  return absl::UnavailableError(StrCat("cannot keep a lock on ", path, ": it keeps being removed"));
}

}  // namespace

class Handover::Impl {
 public:
  explicit Impl(HandoverOptions options)
      : o_(std::move(options)), lead_failures_(o_.retry, std::chrono::seconds(30)) {}

  absl::Status Start() {
    if (o_.id.empty() || o_.id.size() > kMaxId || o_.id.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(StrCat("instance id \"", o_.id, "\" cannot name a file"));
    }
    absl::StatusOr<std::unique_ptr<FileLock>> self = LockForLife(Path(InstanceLockName(o_.id)));
    if (!self.ok()) return self.status();
    self_ = *std::move(self);
    absl::StatusOr<std::unique_ptr<FileLock>> publisher = FileLock::Open(Path(kPublisherLock));
    if (!publisher.ok()) return publisher.status();
    publisher_ = *std::move(publisher);
    inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (inotify_fd_ < 0 || wake_fd_ < 0 ||
        // Only renames into place: the takeover and released files are
        // written so, and nothing the instances do besides (a lock probed,
        // the checkpoint written in place) makes one, so a standing-by
        // instance sleeps until it is asked or its retry comes.
        ::inotify_add_watch(inotify_fd_, o_.folder.c_str(), IN_MOVED_TO) < 0) {
      return absl::UnavailableError(
          StrCat("cannot watch ", o_.folder, " for a newer instance: ", std::strerror(errno)));
    }
    // Asked after the watch is made: a newer instance's ask is never missed.
    if (absl::Status s =
            WriteFileAtomically(Path(kTakeover), o_.id, Durability::kRenamedOnly, 0600);
        !s.ok()) {
      return s;
    }
    Attempt();
    thread_ = std::thread([this] {
      NameThisThread("dra-handover");
      Run();
    });
    return absl::OkStatus();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    if (wake_fd_ >= 0) {
      const uint64_t one = 1;
      (void)!::write(wake_fd_, &one, sizeof one);
    }
    if (thread_.joinable()) thread_.join();
    // A publisher stops publishing before it lets go, as when it hands over:
    // the instance that takes the lock next starts after this one stopped.
    if (leading_ && o_.yield) o_.yield();
    if (inotify_fd_ >= 0) ::close(inotify_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    inotify_fd_ = wake_fd_ = -1;
    // Gone first, then the lock let go: the instance that takes it next
    // does not wait for this one.
    if (self_) ::unlink(self_->path().c_str());
    self_.reset();
    if (publisher_ && publisher_->held()) Release();
    leading_ = false;
  }

  bool leading() const { return leading_; }

 private:
  std::string Path(const std::string& name) const { return StrCat(o_.folder, "/", name); }

  void Run() {
    alignas(inotify_event) char buf[4096];
    auto retry_at = std::chrono::steady_clock::now() + o_.retry;
    for (;;) {
      pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const int n =
          ::poll(fds, 2, PollTimeoutMs(leading_ ? PollDriven::TimePoint::max() : retry_at));
      if (n < 0 && errno != EINTR) return;
      if (fds[1].revents != 0) return;
      bool asked = false, released = false;
      for (ssize_t got; (got = ::read(inotify_fd_, buf, sizeof buf)) > 0;) {
        for (ssize_t off = 0; off < got;) {
          auto* ev = reinterpret_cast<inotify_event*>(buf + off);
          off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
          if (ev->len == 0) continue;
          if (std::strcmp(ev->name, kTakeover) == 0) asked = true;
          if (std::strcmp(ev->name, kReleased) == 0) released = true;
        }
      }
      // A takeover asked (again): the newest wants to publish.
      if (asked) stand_in_for_.clear();
      if (released) {
        // Let go by the newest while it is still there: it could not
        // publish, so an older instance stands in until it asks again.
        absl::StatusOr<std::string> by = ReadFileBounded(Path(kReleased), kMaxId, Links::kRefuse);
        if (by.ok() && *by != o_.id && *by == Newest() && Alive(*by)) stand_in_for_ = *by;
      }
      if (leading_) {
        if (asked) Attempt();
        continue;
      }
      // Standing by: on the retry, or at once when asked or when a
      // publisher let go, if this instance is the one asked for or the one
      // asked for is gone; an older instance does not race the newest for
      // the lock it is handed.
      const bool due = std::chrono::steady_clock::now() >= retry_at;
      if (due) retry_at = std::chrono::steady_clock::now() + o_.retry;
      if (!due && !asked && !released) continue;
      const std::string newest = Newest();
      if (due || newest == o_.id || newest == stand_in_for_ || !Alive(newest)) Attempt();
    }
  }

  // Takes the lock if it is free, and keeps it (leading) unless the
  // takeover file names another instance that is still there.
  void Attempt() {
    if (!leading_ && std::chrono::steady_clock::now() < not_before_) return;
    if (!publisher_->TryLock()) {
      // Held by an older instance standing in since this one could not
      // publish: asked again, it hands over.
      if (ask_again_) {
        ask_again_ = false;
        (void)WriteFileAtomically(Path(kTakeover), o_.id, Durability::kRenamedOnly, 0600);
      }
      return;
    }
    const std::string newest = Newest();
    if (newest != o_.id && newest != stand_in_for_ && Alive(newest)) {
      if (leading_) {
        LogInfo(
            "a newer instance of the DRA driver asks to take over; handing it the "
            "ResourceSlices and the health stream",
            {{"instance", o_.id}, {"newer", newest}});
        leading_ = false;
        if (o_.yield) o_.yield();
      }
      Release();
      return;
    }
    if (leading_) return;
    if (stand_in_for_.empty()) {
      LogInfo("this instance publishes the DRA driver's ResourceSlices and serves its health",
              {{"instance", o_.id}});
    } else {
      LogInfo(
          "this instance publishes the DRA driver's ResourceSlices and serves its health until "
          "the newest instance, which could not, asks again",
          {{"instance", o_.id}, {"newest", stand_in_for_}});
    }
    if (o_.lead && !o_.lead()) {
      // It could not start: another instance may, and this one tries
      // again after a growing wait (`lead` said why).
      const std::chrono::milliseconds wait = lead_failures_.Next();
      LogWarning("this instance cannot publish; letting go for another instance to try",
                 {{"instance", o_.id}, {"retry_in", FormatDuration(wait)}});
      not_before_ = std::chrono::steady_clock::now() + wait;
      ask_again_ = true;
      Release();
      return;
    }
    lead_failures_.Reset();
    leading_ = true;
    RemoveStaleInstances();
  }

  // Lets go of the lock and says so to an instance waiting for it.
  void Release() {
    publisher_->Unlock();
    (void)WriteFileAtomically(Path(kReleased), o_.id, Durability::kRenamedOnly, 0600);
  }

  // The instance the takeover file names ("" when it cannot be read).
  std::string Newest() const {
    absl::StatusOr<std::string> id = ReadFileBounded(Path(kTakeover), kMaxId, Links::kRefuse);
    return id.ok() ? *id : "";
  }

  // Whether instance `id` is still there: its instance lock is held.
  bool Alive(const std::string& id) const {
    if (id.empty() || id.size() > kMaxId || id.find('/') != std::string::npos) return false;
    const std::string path = Path(InstanceLockName(id));
    absl::StatusOr<std::unique_ptr<FileLock>> probe = FileLock::OpenExisting(path);
    if (!probe.ok()) return false;
    if (!(*probe)->TryLock()) return true;
    (*probe)->Unlock();
    return false;
  }

  // Instance locks their processes left behind (killed, or a reboot).
  void RemoveStaleInstances() const {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(o_.folder, ec)) {
      const std::string name = f.path().filename().string();
      if (!name.starts_with("instance-") || !name.ends_with(".lock")) continue;
      if (name == InstanceLockName(o_.id)) continue;
      absl::StatusOr<std::unique_ptr<FileLock>> probe = FileLock::OpenExisting(f.path().string());
      if (!probe.ok() || !(*probe)->TryLock()) continue;
      // Removed while locked: an instance that opened it meanwhile finds
      // it gone once it holds it, and makes it again (LockForLife).
      ::unlink(f.path().c_str());
    }
  }

  const HandoverOptions o_;
  std::unique_ptr<FileLock> self_;
  std::unique_ptr<FileLock> publisher_;
  int inotify_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  // The handover's thread's alone (and Start's caller's before it runs).
  // After a `lead` that failed: no attempt before `not_before_`, then the
  // takeover asked again (`ask_again_`) of whoever stood in meanwhile.
  gpu_agent::Backoff lead_failures_;
  std::chrono::steady_clock::time_point not_before_{};
  bool ask_again_ = false;
  // The newest instance, while it cannot publish and this one stands in.
  std::string stand_in_for_;
  // Written by Start's caller, then by the thread alone.
  std::atomic<bool> leading_{false};
};

Handover::Handover(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Handover::~Handover() { Stop(); }

absl::StatusOr<std::unique_ptr<Handover>> Handover::Start(HandoverOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) {
    impl->Stop();
    return s;
  }
  return std::unique_ptr<Handover>(new Handover(std::move(impl)));
}

void Handover::Stop() { impl_->Stop(); }
bool Handover::leading() const { return impl_->leading(); }

}  // namespace gpu_agent::dra
