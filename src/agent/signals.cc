#include "agent/signals.h"

#include <errno.h>
#include <signal.h>

#include <ctime>

#include "base/log.h"
#include "base/startup_memory.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

// How long after a start or reload the agent releases start-up memory: by
// then the kubelet has dialled back, asked the options and opened its
// stream (milliseconds after registering), or the first PATCH is done.
constexpr std::chrono::seconds kStartupSettles{5};

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
  bool released = false;
  for (;;) {
    const int sig = released ? WaitForSignal() : WaitForSignalFor(kStartupSettles);
    if (sig == 0) {
      // Started (or reloaded) and settled: what only the start touched goes.
      const size_t bytes = ReleaseStartupMemory();
      LogDebug("start-up memory released", {{"bytes_advised", StrCat(bytes)}});
      released = true;
      continue;
    }
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
