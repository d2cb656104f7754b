// How many threads of one kind are running: what a test reads to see that a
// Stop() left none behind (every thread in this room is joined: the health
// watcher's once its NVML wait returned, HealthWatcher::JoinStopped).
#ifndef GPU_AGENT_HEALTH_THREAD_COUNT_H_
#define GPU_AGENT_HEALTH_THREAD_COUNT_H_

#include <atomic>

namespace gpu_agent::health {

class ThreadCount {
 public:
  // Counts the thread that makes it for as long as it lives; the last thing
  // a thread's function ends.
  class Scope {
   public:
    explicit Scope(ThreadCount* count) : count_(count) { count_->running_.fetch_add(1); }
    ~Scope() { count_->running_.fetch_sub(1); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ThreadCount* const count_;
  };

  int running() const { return running_.load(); }

 private:
  std::atomic<int> running_{0};
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_THREAD_COUNT_H_
