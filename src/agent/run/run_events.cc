#include "agent/run/run_events.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {

absl::StatusOr<std::unique_ptr<RunEvents>> RunEvents::Create() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&set, sig);
  const int sfd = ::signalfd(-1, &set, SFD_CLOEXEC);
  if (sfd < 0) return absl::InternalError(StrCat("signalfd: ", std::strerror(errno)));
  const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) {
    const int err = errno;
    ::close(sfd);
    return absl::InternalError(StrCat("eventfd: ", std::strerror(err)));
  }
  return std::unique_ptr<RunEvents>(new RunEvents(sfd, efd));
}

RunEvents::~RunEvents() {
  ::close(signal_fd_);
  ::close(event_fd_);
}

void RunEvents::PostReload(std::string reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reasons_.push_back(std::move(reason));
  }
  const uint64_t one = 1;
  // Fails only when the counter would overflow, and then it is set already.
  (void)!::write(event_fd_, &one, sizeof one);
}

bool RunEvents::TakeSignal(Event* out) {
  // A stop first: the signalfd hands out the lowest-numbered signal first,
  // so SIGHUP (1) would come before a SIGINT (2) or SIGTERM (15) sent with it.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  const timespec now{0, 0};
  if (const int sig = sigtimedwait(&stops, nullptr, &now); sig > 0) {
    *out = {Kind::kStop, sig == SIGTERM ? "SIGTERM" : "SIGINT"};
    return true;
  }
  pollfd p{signal_fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) return false;
  signalfd_siginfo info;
  if (::read(signal_fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return false;
  switch (info.ssi_signo) {
    case SIGHUP: {
      // Reloads posted meanwhile are done by this one.
      std::lock_guard<std::mutex> lock(mu_);
      reasons_.insert(reasons_.begin(), "SIGHUP");
      *out = {Kind::kReload, StrJoin(reasons_, "; ")};
      reasons_.clear();
      break;
    }
    case SIGUSR1:
      *out = {Kind::kVouch, "SIGUSR1"};
      break;
    default:
      *out = {Kind::kStop, info.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT"};
  }
  return true;
}

RunEvents::Event RunEvents::Next() {
  for (;;) {
    Event e;
    if (TakeSignal(&e)) return e;
    uint64_t n = 0;
    if (::read(event_fd_, &n, sizeof n) == static_cast<ssize_t>(sizeof n)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!reasons_.empty()) {
        e = {Kind::kReload, StrJoin(reasons_, "; ")};
        reasons_.clear();
        return e;
      }
    }
    std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}, {event_fd_, POLLIN, 0}};
    int timeout_ms = -1;
    if (driven_ != nullptr) {
      const PollDriven::TimePoint due = driven_->Turn();
      for (int fd : driven_->Descriptors()) fds.push_back({fd, POLLIN, 0});
      timeout_ms = PollTimeoutMs(due);
    }
    int ready;
    while ((ready = ::poll(fds.data(), fds.size(), timeout_ms)) < 0 && errno == EINTR) {
    }
    if (ready < 0) {
      // Cannot happen with valid descriptors short of ENOMEM; waiting on
      // would spin, so the agent stops and its supervisor restarts it.
      LogError("cannot wait for signals; stopping", {{"error", std::strerror(errno)}});
      return {Kind::kStop, "poll failed"};
    }
  }
}

}  // namespace gpu_agent
