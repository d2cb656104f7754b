// Signals are blocked in every thread and taken synchronously (sigtimedwait
// here, a signalfd in run_events.h), so no handler runs at an arbitrary point.
#ifndef GPU_AGENT_AGENT_RUN_SIGNALS_H_
#define GPU_AGENT_AGENT_RUN_SIGNALS_H_

#include <chrono>

namespace gpu_agent {

// Blocks SIGTERM, SIGINT, SIGHUP and SIGUSR1 and ignores SIGPIPE. Call before any
// thread starts: threads inherit the mask.
void BlockShutdownSignals();

// Waits for one of the blocked signals for at most `timeout` and returns it;
// 0 when none came.
int WaitForSignalFor(std::chrono::milliseconds timeout);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_SIGNALS_H_
