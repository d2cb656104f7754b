#include "dra/handover.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "base/file_lock.h"
#include "base/file_util.h"
#include "base/log.h"
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
  explicit Impl(HandoverOptions options) : o_(std::move(options)) {}

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
        ::inotify_add_watch(inotify_fd_, o_.folder.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
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
    for (;;) {
      pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const int timeout = leading_ ? -1 : static_cast<int>(o_.retry.count());
      const int n = ::poll(fds, 2, timeout);
      if (n < 0 && errno != EINTR) return;
      if (fds[1].revents != 0) return;
      bool asked = false;
      for (ssize_t got; (got = ::read(inotify_fd_, buf, sizeof buf)) > 0;) {
        for (ssize_t off = 0; off < got;) {
          auto* ev = reinterpret_cast<inotify_event*>(buf + off);
          off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
          if (ev->len > 0 && std::strcmp(ev->name, kTakeover) == 0) asked = true;
        }
      }
      if (leading_) {
        if (asked) Attempt();
        continue;
      }
      // Standing by: on the retry, or at once when this instance is the one
      // asked for or the one asked for is gone (a publisher that let go
      // wakes it with `released`); an older instance does not race the
      // newest for the lock it is handed.
      const std::string newest = Newest();
      if (n == 0 || newest == o_.id || !Alive(newest)) Attempt();
    }
  }

  // Takes the lock if it is free, and keeps it (leading) unless the
  // takeover file names another instance that is still there.
  void Attempt() {
    if (!publisher_->TryLock()) return;
    const std::string newest = Newest();
    if (newest != o_.id && Alive(newest)) {
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
    LogInfo("this instance publishes the DRA driver's ResourceSlices and serves its health",
            {{"instance", o_.id}});
    if (o_.lead) o_.lead();
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
    if (!PathExists(path)) return false;
    absl::StatusOr<std::unique_ptr<FileLock>> probe = FileLock::Open(path);
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
      absl::StatusOr<std::unique_ptr<FileLock>> probe = FileLock::Open(f.path().string());
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
