// Runs one HTTP endpoint's handler (/metrics, /healthz or /readyz) off the
// server's I/O thread, so that a handler that blocks (plugin mode's /healthz
// calls each served socket, up to 1 s each) delays neither the I/O thread
// nor the other endpoints.
//
// Requests are not queued one by one: every request waiting when an
// evaluation starts is answered by that one evaluation, so a flood of
// requests costs one evaluation at a time, and a request waits at most for
// the evaluation under way and then its own. Evaluations start at least
// `min_interval` apart, which bounds the CPU a flood can spend on them.
//
// The thread starts when a request waits and ends when none does: an idle
// endpoint holds no thread. Stop() joins it; no thread is ever detached.
#ifndef GPU_AGENT_AGENT_RUN_ENDPOINT_WORKER_H_
#define GPU_AGENT_AGENT_RUN_ENDPOINT_WORKER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpu_agent {

// What an evaluation answers; the body is shared by every request it
// answers.
struct EndpointAnswer {
  int status = 200;
  std::string content_type = "text/plain";
  std::shared_ptr<const std::string> body;
};

class EndpointWorker {
 public:
  using Handler = std::function<EndpointAnswer()>;
  // Called on the worker's thread with the requests (the ids Ask was given)
  // one evaluation answers. Must not call back into this worker.
  using Done = std::function<void(std::vector<uint64_t> waiters, EndpointAnswer answer)>;

  // `thread_name`: at most 15 characters.
  EndpointWorker(std::string thread_name, std::chrono::milliseconds min_interval, Handler handler,
                 Done done);
  ~EndpointWorker();  // Stop()
  EndpointWorker(const EndpointWorker&) = delete;
  EndpointWorker& operator=(const EndpointWorker&) = delete;

  // Has `waiter` answered by the next evaluation that starts after this
  // call. Never waits for a handler. False when stopped or when no thread
  // can be started (the caller answers 503).
  bool Ask(uint64_t waiter);
  // Waits for an evaluation under way to end; no more start after it. The
  // requests still waiting are dropped.
  void Stop();

 private:
  void Run();

  // Constant after construction.
  const std::string thread_name_;
  const std::chrono::milliseconds min_interval_;
  const Handler handler_;
  const Done done_;

  std::mutex mu_;
  std::condition_variable stop_cv_;
  std::vector<uint64_t> waiting_;  // protected by mu_
  bool running_ = false;           // protected by mu_: thread_ is in Run()
  bool stopped_ = false;           // protected by mu_
  std::thread thread_;             // started and joined under mu_, or by Stop()
  // When the last evaluation started; read and written by the worker only.
  std::chrono::steady_clock::time_point last_start_;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_ENDPOINT_WORKER_H_
