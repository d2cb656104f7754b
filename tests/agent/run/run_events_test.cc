// The run's event queue: signals taken from a signalfd, reloads posted by
// other threads, a stop before anything waiting with it.
#include "agent/run/run_events.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "agent/run/signals.h"

namespace gpu_agent {
namespace {

class RunEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BlockShutdownSignals();  // as run does, before any thread starts
    absl::StatusOr<std::unique_ptr<RunEvents>> e = RunEvents::Create();
    ASSERT_TRUE(e.ok()) << e.status();
    events_ = *std::move(e);
  }
  std::unique_ptr<RunEvents> events_;
};

TEST_F(RunEventsTest, AStopComesBeforeAReloadSentWithIt) {
  // SIGHUP (1) is the lowest-numbered, so a signalfd alone hands it out first.
  ASSERT_EQ(::raise(SIGHUP), 0);
  ASSERT_EQ(::raise(SIGTERM), 0);
  RunEvents::Event e = events_->Next();
  EXPECT_EQ(e.kind, RunEvents::Kind::kStop);
  EXPECT_EQ(e.reason, "SIGTERM");
  e = events_->Next();
  EXPECT_EQ(e.kind, RunEvents::Kind::kReload);
  EXPECT_EQ(e.reason, "SIGHUP");
}

TEST_F(RunEventsTest, SigintStopsAndSigusr1Vouches) {
  ASSERT_EQ(::raise(SIGUSR1), 0);
  RunEvents::Event e = events_->Next();
  EXPECT_EQ(e.kind, RunEvents::Kind::kVouch);
  ASSERT_EQ(::raise(SIGINT), 0);
  e = events_->Next();
  EXPECT_EQ(e.kind, RunEvents::Kind::kStop);
  EXPECT_EQ(e.reason, "SIGINT");
}

TEST_F(RunEventsTest, PostedReloadsFromAnotherThreadBecomeOne) {
  std::thread poster([this] {
    events_->PostReload("label changed to a");
    events_->PostReload("label changed to b");
  });
  poster.join();
  RunEvents::Event e = events_->Next();
  EXPECT_EQ(e.kind, RunEvents::Kind::kReload);
  EXPECT_EQ(e.reason, "label changed to a; label changed to b");
}

// Next blocks until a post arrives from another thread.
TEST_F(RunEventsTest, NextWaitsForAPost) {
  std::thread poster([this] { events_->PostReload("later"); });
  RunEvents::Event e = events_->Next();
  poster.join();
  EXPECT_EQ(e.kind, RunEvents::Kind::kReload);
  EXPECT_EQ(e.reason, "later");
}

TEST_F(RunEventsTest, ASighupTakesTheReloadsPostedBeforeIt) {
  events_->PostReload("label changed");
  ASSERT_EQ(::raise(SIGHUP), 0);
  RunEvents::Event e = events_->Next();
  EXPECT_EQ(e.kind, RunEvents::Kind::kReload);
  EXPECT_EQ(e.reason, "SIGHUP; label changed");
  // Nothing is left over: the next event is the one sent now.
  ASSERT_EQ(::raise(SIGTERM), 0);
  EXPECT_EQ(events_->Next().kind, RunEvents::Kind::kStop);
}

}  // namespace
}  // namespace gpu_agent
