#include "agent/grpc_event_engine.h"

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace gpu_agent {
namespace {

using grpc_event_engine::experimental::EndpointConfig;
using grpc_event_engine::experimental::EventEngine;
using grpc_event_engine::experimental::MemoryAllocator;
using grpc_event_engine::experimental::MemoryAllocatorFactory;
using Clock = std::chrono::steady_clock;
using Task = absl::AnyInvocable<void()>;

// Worker threads kept waiting for closures; more start while every one is
// busy (a closure may block) and leave once the queue is empty again.
constexpr int kKeptWorkers = 2;

// What the engine's threads share with it. The engine may be destroyed on
// one of its own workers (a closure dropping gRPC's last reference), so the
// threads hold the state, not the engine.
struct State {
  std::mutex mu;
  std::condition_variable work;    // workers: a closure queued, or the stop
  std::condition_variable timers;  // the timer thread: an earlier timer, or the stop
  std::condition_variable gone;    // the destructor: a thread has left
  std::deque<Task> queue;
  std::map<uint64_t, std::pair<Clock::time_point, Task>> pending;  // by id
  std::set<std::pair<Clock::time_point, uint64_t>> order;          // by deadline
  uint64_t next_id = 1;
  int workers = 0;
  int idle = 0;
  bool timer_thread = false;
  int threads = 0;  // started and not yet left
  bool stop = false;
};

thread_local const State* t_worker_of = nullptr;

void Leave(State& s) {
  --s.threads;
  s.gone.notify_all();
}

// Runs closures until the engine stops and the queue is empty, or, for a
// worker beyond kKeptWorkers, until the queue is empty.
void WorkerLoop(std::shared_ptr<State> s) {
  t_worker_of = s.get();
  pthread_setname_np(pthread_self(), "grpc_ee_worker");
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    if (s->queue.empty()) {
      if (s->stop || s->workers > kKeptWorkers) break;
      ++s->idle;
      s->work.wait(lock, [&] { return s->stop || !s->queue.empty(); });
      --s->idle;
      continue;
    }
    Task task = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // its captures are released outside the lock too
    lock.lock();
  }
  --s->workers;
  Leave(*s);
}

// Queues a closure and starts a worker when none is free for it. Called
// with the lock held.
void EnqueueLocked(const std::shared_ptr<State>& s, Task task) {
  s->queue.push_back(std::move(task));
  if (static_cast<int>(s->queue.size()) > s->idle) {
    ++s->workers;
    ++s->threads;
    std::thread(WorkerLoop, s).detach();
  } else {
    s->work.notify_one();
  }
}

// Sleeps until the earliest timer is due (with no timer, until one is
// added), then hands every due timer's closure to the workers.
void TimerLoop(std::shared_ptr<State> s) {
  pthread_setname_np(pthread_self(), "grpc_ee_timer");
  std::unique_lock<std::mutex> lock(s->mu);
  while (!s->stop) {
    if (s->order.empty()) {
      s->timers.wait(lock);
      continue;
    }
    const Clock::time_point first = s->order.begin()->first;
    if (Clock::now() < first) {
      s->timers.wait_until(lock, first);
      continue;
    }
    const Clock::time_point now = Clock::now();
    while (!s->order.empty() && s->order.begin()->first <= now) {
      const uint64_t id = s->order.begin()->second;
      s->order.erase(s->order.begin());
      auto it = s->pending.find(id);
      Task task = std::move(it->second.second);
      s->pending.erase(it);
      EnqueueLocked(s, std::move(task));
    }
  }
  Leave(*s);
}

class GrpcEventEngine final : public EventEngine {
 public:
  GrpcEventEngine() : s_(std::make_shared<State>()) {}

  // Closures queued run first (as gRPC's own engine quiesces); timers not
  // yet due are dropped unrun. Waits for every thread but the caller's.
  ~GrpcEventEngine() override {
    std::unique_lock<std::mutex> lock(s_->mu);
    s_->stop = true;
    s_->order.clear();
    std::map<uint64_t, std::pair<Clock::time_point, Task>> dropped = std::move(s_->pending);
    s_->pending.clear();
    s_->work.notify_all();
    s_->timers.notify_all();
    const int self = t_worker_of == s_.get() ? 1 : 0;
    s_->gone.wait(lock, [&] { return s_->threads == self; });
    lock.unlock();
  }

  bool IsWorkerThread() override { return t_worker_of == s_.get(); }

  void Run(Closure* closure) override {
    Run([closure] { closure->Run(); });
  }

  void Run(absl::AnyInvocable<void()> closure) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    EnqueueLocked(s_, std::move(closure));
  }

  TaskHandle RunAfter(Duration when, Closure* closure) override {
    return RunAfter(when, [closure] { closure->Run(); });
  }

  TaskHandle RunAfter(Duration when, absl::AnyInvocable<void()> closure) override {
    const Clock::time_point at =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::max(when, Duration(0)));
    std::lock_guard<std::mutex> lock(s_->mu);
    const uint64_t id = s_->next_id++;
    const bool earliest = s_->order.empty() || at < s_->order.begin()->first;
    s_->pending.emplace(id, std::make_pair(at, std::move(closure)));
    s_->order.emplace(at, id);
    if (!s_->timer_thread) {
      s_->timer_thread = true;
      ++s_->threads;
      std::thread(TimerLoop, s_).detach();
    } else if (earliest) {
      s_->timers.notify_one();
    }
    return TaskHandle{{static_cast<intptr_t>(id), reinterpret_cast<intptr_t>(s_.get())}};
  }

  // True when the timer had not fired: its closure is destroyed unrun.
  bool Cancel(TaskHandle handle) override {
    if (handle.keys[1] != reinterpret_cast<intptr_t>(s_.get())) return false;
    Task dropped;
    std::lock_guard<std::mutex> lock(s_->mu);
    auto it = s_->pending.find(static_cast<uint64_t>(handle.keys[0]));
    if (it == s_->pending.end()) return false;
    s_->order.erase({it->second.first, it->first});
    dropped = std::move(it->second.second);
    s_->pending.erase(it);
    return true;
  }

  // gRPC 1.51's I/O manager does the agent's sockets and lookups; these
  // serve only gRPC's experiments, under which the engine is not installed.
  absl::StatusOr<std::unique_ptr<Listener>> CreateListener(
      Listener::AcceptCallback, absl::AnyInvocable<void(absl::Status)>, const EndpointConfig&,
      std::unique_ptr<MemoryAllocatorFactory>) override {
    return absl::UnimplementedError("the agent's gRPC EventEngine has no listeners");
  }

  ConnectionHandle Connect(OnConnectCallback on_connect, const ResolvedAddress&,
                           const EndpointConfig&, MemoryAllocator, Duration) override {
    Run([cb = std::move(on_connect)]() mutable {
      cb(absl::UnimplementedError("the agent's gRPC EventEngine makes no connections"));
    });
    return ConnectionHandle{{0, 0}};
  }

  bool CancelConnect(ConnectionHandle) override { return false; }

  std::unique_ptr<DNSResolver> GetDNSResolver(const DNSResolver::ResolverOptions&) override {
    return std::make_unique<NoResolver>(this);
  }

 private:
  // Answers every lookup with an error, on a worker as a lookup would.
  class NoResolver final : public DNSResolver {
   public:
    explicit NoResolver(EventEngine* engine) : engine_(engine) {}
    LookupTaskHandle LookupHostname(LookupHostnameCallback cb, absl::string_view, absl::string_view,
                                    Duration) override {
      engine_->Run([cb = std::move(cb)]() mutable { cb(Unserved()); });
      return LookupTaskHandle{{0, 0}};
    }
    LookupTaskHandle LookupSRV(LookupSRVCallback cb, absl::string_view, Duration) override {
      engine_->Run([cb = std::move(cb)]() mutable { cb(Unserved()); });
      return LookupTaskHandle{{0, 0}};
    }
    LookupTaskHandle LookupTXT(LookupTXTCallback cb, absl::string_view, Duration) override {
      engine_->Run([cb = std::move(cb)]() mutable { cb(Unserved()); });
      return LookupTaskHandle{{0, 0}};
    }
    bool CancelLookup(LookupTaskHandle) override { return false; }

   private:
    static absl::Status Unserved() {
      return absl::UnimplementedError("the agent's gRPC EventEngine does no lookups");
    }
    EventEngine* engine_;
  };

  std::shared_ptr<State> s_;
};

}  // namespace

std::unique_ptr<EventEngine> MakeGrpcEventEngine() { return std::make_unique<GrpcEventEngine>(); }

void InstallGrpcEventEngine() {
  const char* experiments = std::getenv("GRPC_EXPERIMENTS");
  if (experiments != nullptr && *experiments != '\0') return;
  grpc_event_engine::experimental::SetEventEngineFactory(MakeGrpcEventEngine);
}

}  // namespace gpu_agent
