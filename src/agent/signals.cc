#include "agent/signals.h"

#include <errno.h>
#include <signal.h>

#include <ctime>

#include "base/log.h"

namespace gpu_agent {
namespace {

sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int WaitForSignal() {
  sigset_t set = ShutdownSet();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

int WaitForSignalFor(std::chrono::milliseconds timeout) {
  sigset_t set = ShutdownSet();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) left = std::chrono::nanoseconds(0);
    timespec ts{static_cast<time_t>(left.count() / 1000000000),
                static_cast<long>(left.count() % 1000000000)};
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return 0;  // timed out; EINTR: wait on
  }
}

bool WaitForReloadOrStop(const std::function<void()>& on_sigusr1) {
  for (;;) {
    const int sig = WaitForSignal();
    if (sig == SIGUSR1) {
      on_sigusr1();
      continue;
    }
    if (sig == SIGHUP) return true;
    LogInfo("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    return false;
  }
}

}  // namespace gpu_agent
