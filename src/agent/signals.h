// Signals are blocked in every thread and taken synchronously with sigwait,
// so no handler runs at an arbitrary point.
#ifndef GPU_AGENT_AGENT_SIGNALS_H_
#define GPU_AGENT_AGENT_SIGNALS_H_

#include <chrono>
#include <functional>

namespace gpu_agent {

// Blocks SIGTERM, SIGINT, SIGHUP and SIGUSR1 and ignores SIGPIPE. Call before any
// thread starts: threads inherit the mask.
void BlockShutdownSignals();

// Waits for one of the blocked signals and returns it.
int WaitForSignal();

// The same, for at most `timeout`: 0 when none came.
int WaitForSignalFor(std::chrono::milliseconds timeout);

// Waits for a signal: true for SIGHUP (reload), false for SIGTERM or SIGINT
// (after logging which). SIGUSR1 (an operator vouching that GPUs held for a
// reset were reset) calls `on_sigusr1` and waits on.
bool WaitForReloadOrStop(const std::function<void()>& on_sigusr1);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_SIGNALS_H_
