// The EventEngine gpu-agent gives gRPC (agent/grpc_event_engine.h): closures
// run on its workers, timers in deadline order and never early, a cancelled
// timer never runs, a blocked closure does not hold up the others, and the
// engine may be destroyed on its own worker.
#include "agent/grpc_event_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace gpu_agent {
namespace {

using grpc_event_engine::experimental::EventEngine;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::seconds(10);

// A count the test waits on with a deadline.
class Count {
 public:
  void Add() {
    std::lock_guard<std::mutex> lock(mu_);
    ++n_;
    cv_.notify_all();
  }
  bool WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return n_ >= n; });
  }
  int Now() {
    std::lock_guard<std::mutex> lock(mu_);
    return n_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

TEST(GrpcEventEngineTest, RunsClosuresOnItsWorkers) {
  Count ran;
  std::atomic<int> on_worker{0};
  std::unique_ptr<EventEngine> engine = MakeGrpcEventEngine();  // gone first
  EXPECT_FALSE(engine->IsWorkerThread());
  for (int i = 0; i < 100; ++i) {
    engine->Run([&] {
      if (engine->IsWorkerThread()) ++on_worker;
      ran.Add();
    });
  }
  ASSERT_TRUE(ran.WaitFor(100));
  EXPECT_EQ(on_worker.load(), 100);
}

TEST(GrpcEventEngineTest, TimersRunInDeadlineOrderAndNeverEarly) {
  std::mutex mu;
  std::vector<int> order;
  Count ran;
  std::atomic<bool> early{false};
  std::unique_ptr<EventEngine> engine = MakeGrpcEventEngine();
  const Clock::time_point start = Clock::now();
  for (int ms : {60, 20, 40, 0}) {
    engine->RunAfter(milliseconds(ms), [&, ms] {
      if (Clock::now() - start < milliseconds(ms)) early = true;
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(ms);
      }
      ran.Add();
    });
  }
  ASSERT_TRUE(ran.WaitFor(4));
  EXPECT_FALSE(early.load());
  EXPECT_EQ(order, (std::vector<int>{0, 20, 40, 60}));
}

TEST(GrpcEventEngineTest, ACancelledTimerNeverRuns) {
  Count ran;
  auto held = std::make_shared<int>(0);
  std::unique_ptr<EventEngine> engine = MakeGrpcEventEngine();
  const EventEngine::TaskHandle cancelled =
      engine->RunAfter(milliseconds(30), [&, held] { ran.Add(); });
  const EventEngine::TaskHandle fired = engine->RunAfter(milliseconds(0), [&] { ran.Add(); });
  EXPECT_TRUE(engine->Cancel(cancelled));
  EXPECT_EQ(held.use_count(), 1) << "the cancelled closure is destroyed by Cancel";
  EXPECT_FALSE(engine->Cancel(cancelled)) << "only once";
  ASSERT_TRUE(ran.WaitFor(1));
  EXPECT_FALSE(engine->Cancel(fired)) << "a timer that fired cannot be cancelled";
  // One due after the cancelled one's deadline: the cancelled one would have run first.
  engine->RunAfter(milliseconds(60), [&] { ran.Add(); });
  ASSERT_TRUE(ran.WaitFor(2));
  EXPECT_EQ(ran.Now(), 2);

  std::unique_ptr<EventEngine> other = MakeGrpcEventEngine();
  const EventEngine::TaskHandle foreign = other->RunAfter(std::chrono::hours(1), [] {});
  EXPECT_FALSE(engine->Cancel(foreign)) << "another engine's handle";
  EXPECT_TRUE(other->Cancel(foreign));
}

TEST(GrpcEventEngineTest, ABlockedClosureDoesNotHoldUpTheOthers) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  Count blocked;
  Count ran;
  std::unique_ptr<EventEngine> engine = MakeGrpcEventEngine();
  for (int i = 0; i < 3; ++i) {
    engine->Run([&] {
      blocked.Add();
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return release; });
    });
  }
  ASSERT_TRUE(blocked.WaitFor(3));
  engine->Run([&] { ran.Add(); });
  engine->RunAfter(milliseconds(1), [&] { ran.Add(); });
  EXPECT_TRUE(ran.WaitFor(2));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
}

TEST(GrpcEventEngineTest, DestroyedOnItsOwnWorker) {
  auto destroyed = std::make_shared<Count>();
  std::shared_ptr<EventEngine> engine = MakeGrpcEventEngine();
  EventEngine* raw = engine.get();
  raw->Run([destroyed, moved = std::move(engine)]() mutable {
    moved.reset();  // gRPC's last reference, dropped on the engine's own worker
    destroyed->Add();
  });
  EXPECT_TRUE(destroyed->WaitFor(1));
}

TEST(GrpcEventEngineTest, DestructionRunsQueuedClosuresAndDropsTimers) {
  Count ran;
  auto held = std::make_shared<int>(0);
  {
    std::unique_ptr<EventEngine> engine = MakeGrpcEventEngine();
    for (int i = 0; i < 10; ++i) engine->Run([&] { ran.Add(); });
    engine->RunAfter(std::chrono::hours(1), [&, held] { ran.Add(); });
  }
  EXPECT_EQ(ran.Now(), 10);
  EXPECT_EQ(held.use_count(), 1);
}

TEST(GrpcEventEngineTest, LookupsAndConnectionsAreRefusedNotDropped) {
  Count answered;
  std::unique_ptr<EventEngine> engine = MakeGrpcEventEngine();
  auto resolver = engine->GetDNSResolver({});
  ASSERT_NE(resolver, nullptr);
  resolver->LookupHostname(
      [&](absl::StatusOr<std::vector<EventEngine::ResolvedAddress>> r) {
        EXPECT_FALSE(r.ok());
        answered.Add();
      },
      "localhost", "80", std::chrono::seconds(1));
  EXPECT_TRUE(answered.WaitFor(1));
}

}  // namespace
}  // namespace gpu_agent
