// Handover between instances of the DRA driver on one node, each a
// dra::Handover on the same folder (flock conflicts between two open files
// of one process as between two processes; a killed process is a forked
// child): the newest publishes, an older one takes over when it goes, and
// nothing left from before keeps a lone instance from publishing.
#include "dra/handover.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <string_view>

#include "base/file_util.h"
#include "support/test_support.h"

namespace gpu_agent::dra {
namespace {

using gpu_agent::testing::TempDir;
using gpu_agent::testing::WaitFor;

struct Instance {
  std::atomic<int> leads{0}, yields{0};
  std::atomic<bool> can_lead{true};  // what `lead` answers
  std::unique_ptr<Handover> handover;
  bool leading() const { return handover && handover->leading(); }
};

class HandoverTest : public ::testing::Test {
 protected:
  // Every instance's `lead` and `yield` count the publishers of the test's
  // folder: there must never be two at once.
  void StartInstance(Instance& i, const std::string& id) {
    HandoverOptions o;
    o.folder = dir_.path();
    o.id = id;
    o.lead = [this, &i] {
      ++i.leads;
      if (!i.can_lead) return false;
      const int now = ++publishers_;
      int seen = most_publishers_;
      while (now > seen && !most_publishers_.compare_exchange_weak(seen, now)) {
      }
      return true;
    };
    o.yield = [this, &i] {
      ++i.yields;
      --publishers_;
    };
    o.retry = std::chrono::milliseconds(200);
    absl::StatusOr<std::unique_ptr<Handover>> h = Handover::Start(std::move(o));
    ASSERT_TRUE(h.ok()) << h.status();
    i.handover = *std::move(h);
  }
  TempDir dir_;
  std::atomic<int> publishers_{0}, most_publishers_{0};
};

double ProcessCpuSeconds() {
  timespec t;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

TEST_F(HandoverTest, ALoneInstanceLeadsAtOnceWhateverAnEarlierRunLeft) {
  // A takeover asked by an instance long gone, and its lock file.
  dir_.Write("takeover", "old-pod");
  dir_.Write("instance-old-pod.lock", "");
  Instance a;
  ASSERT_NO_FATAL_FAILURE(StartInstance(a, "pod-a"));
  EXPECT_TRUE(a.leading());  // before Start returned
  EXPECT_EQ(a.leads.load(), 1);
  EXPECT_FALSE(PathExists(dir_.Join("instance-old-pod.lock")));
  a.handover->Stop();
  EXPECT_EQ(a.yields.load(), 1);  // stopped publishing before it let go
  EXPECT_FALSE(PathExists(dir_.Join("instance-pod-a.lock")));
}

// A rolling update: the new instance takes over from the old; should it go
// (a rollback), the old one takes over again; a third newer one takes over
// from whichever publishes.
TEST_F(HandoverTest, TheNewestInstanceLeadsAndAnOlderOneTakesOverWhenItGoes) {
  Instance a, b, c;
  ASSERT_NO_FATAL_FAILURE(StartInstance(a, "pod-a"));
  ASSERT_TRUE(a.leading());
  ASSERT_NO_FATAL_FAILURE(StartInstance(b, "pod-b"));
  ASSERT_TRUE(WaitFor([&] { return b.leading(); }));
  EXPECT_FALSE(a.leading());
  EXPECT_EQ(a.yields.load(), 1);
  EXPECT_EQ(b.leads.load(), 1);
  EXPECT_EQ(a.leads.load(), 1);  // never took it back meanwhile
  b.handover->Stop();
  ASSERT_TRUE(WaitFor([&] { return a.leading(); }));
  EXPECT_EQ(a.leads.load(), 2);
  ASSERT_NO_FATAL_FAILURE(StartInstance(c, "pod-c"));
  ASSERT_TRUE(WaitFor([&] { return c.leading(); }));
  EXPECT_FALSE(a.leading());
  EXPECT_EQ(a.yields.load(), 2);
  EXPECT_EQ(b.yields.load(), 1);  // its stop
  // Never two publishers: each one stopped before the next started (a
  // stop let go of the lock first, and the older one published beside it).
  EXPECT_EQ(most_publishers_.load(), 1);
}

// An instance standing by sleeps: it wakes for a takeover asked, a lock
// let go, or its retry, not for its own probes of the others' locks (each
// probe's close woke it again: a core burnt for as long as it stood by).
TEST_F(HandoverTest, AnInstanceStandingBySleeps) {
  Instance a, b;
  ASSERT_NO_FATAL_FAILURE(StartInstance(a, "pod-a"));
  ASSERT_NO_FATAL_FAILURE(StartInstance(b, "pod-b"));
  ASSERT_TRUE(WaitFor([&] { return b.leading() && !a.leading(); }));
  // Each retry of the instance standing by reads the takeover file once:
  // the CPU is measured over five retries (about a second), counted as
  // they happen.
  const int reads = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(reads, 0);
  ASSERT_GE(::inotify_add_watch(reads, dir_.path().c_str(), IN_OPEN), 0);
  int retries = 0;
  const double before = ProcessCpuSeconds();
  const bool counted = WaitFor([&] {
    alignas(inotify_event) char buf[4096];
    for (ssize_t got; (got = ::read(reads, buf, sizeof buf)) > 0;) {
      for (ssize_t off = 0; off < got;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        if (ev->len > 0 && std::string_view(ev->name) == "takeover") ++retries;
      }
    }
    return retries >= 5;
  });
  const double used = ProcessCpuSeconds() - before;
  ::close(reads);
  ASSERT_TRUE(counted) << retries << " retries seen";
  // Five retries of a few system calls each; spinning is the whole span.
  EXPECT_LT(used, 0.2) << "CPU seconds in five retries of standing by";
  EXPECT_FALSE(a.leading());
  EXPECT_TRUE(b.leading());
}

// A `lead` that fails (the publisher cannot start) lets go: another
// instance takes over, and the one that failed tries again later.
TEST_F(HandoverTest, AnInstanceThatCannotPublishLetsAnotherTry) {
  Instance a, b;
  ASSERT_NO_FATAL_FAILURE(StartInstance(a, "pod-a"));
  ASSERT_TRUE(a.leading());
  b.can_lead = false;
  ASSERT_NO_FATAL_FAILURE(StartInstance(b, "pod-b"));
  // b is asked for, cannot, lets go; a (older) takes the lock back.
  ASSERT_TRUE(WaitFor([&] { return b.leads >= 1 && a.leading(); }));
  EXPECT_FALSE(b.leading());
  b.can_lead = true;
  ASSERT_TRUE(WaitFor([&] { return b.leading(); }, std::chrono::seconds(10)));
  EXPECT_FALSE(a.leading());
  EXPECT_EQ(most_publishers_.load(), 1);
}

// The newest instance killed: the kernel drops its locks, and the older
// one takes over within its retry.
TEST_F(HandoverTest, AnOlderInstanceTakesOverFromANewerOneThatWasKilled) {
  Instance a;
  ASSERT_NO_FATAL_FAILURE(StartInstance(a, "pod-a"));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    HandoverOptions o;
    o.folder = dir_.path();
    o.id = "pod-b";
    absl::StatusOr<std::unique_ptr<Handover>> h = Handover::Start(std::move(o));
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  // The child's word, or a failure after 20 s (never a hang).
  pollfd p = {ready[0], POLLIN, 0};
  if (::poll(&p, 1, 20000) != 1) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    FAIL() << "the forked instance did not start";
  }
  char x;
  ASSERT_EQ(::read(ready[0], &x, 1), 1);
  ASSERT_TRUE(WaitFor([&] { return a.yields == 1; }));
  EXPECT_FALSE(a.leading());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(WaitFor([&] { return a.leading(); }));
  EXPECT_EQ(a.leads.load(), 2);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(HandoverTest, AnIdThatCannotNameAFileIsRefused) {
  HandoverOptions o;
  o.folder = dir_.path();
  o.id = "../x";
  EXPECT_FALSE(Handover::Start(o).ok());
}

}  // namespace
}  // namespace gpu_agent::dra
