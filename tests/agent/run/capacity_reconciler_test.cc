// The capacity reconciler in-process against the API server stand-in, on a
// fake clock: what depends on minutes passing (the fight window) is stepped,
// not waited for.
#include "agent/run/capacity_reconciler.h"

#include <gtest/gtest.h>

#include "api_server_stub.h"
#include "apiserver/connection.h"
#include "support/fake_clock.h"
#include "support/proxy_connection.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using gpu_agent::testing::ApiServerStub;
using gpu_agent::testing::FakeClock;
using gpu_agent::testing::WaitFor;
using std::chrono::seconds;

constexpr char kNode[] = "gpu-node-1";
constexpr char kGpu[] = "nvidia.com/gpu";

class ReconcilerClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.AddNode(kNode);
    absl::StatusOr<apiserver::Connection> conn = gpu_agent::testing::ProxyConnection(server_.url());
    ASSERT_TRUE(conn.ok()) << conn.status();
    ReconcilerOptions o;
    o.node = kNode;
    o.fight_resets = 3;
    o.fight_window = std::chrono::minutes(2);
    o.clock = &clock_;
    absl::StatusOr<std::unique_ptr<CapacityReconciler>> r =
        CapacityReconciler::Start(*conn, o, apiserver::Capacities{{kGpu, 4}});
    ASSERT_TRUE(r.ok()) << r.status();
    reconciler_ = *std::move(r);
    ASSERT_TRUE(Repaired());
  }

  // The kubelet zeroes the value; the reconciler sees it on its watch and,
  // unless it has decided it is in a fight, puts it back.
  void KubeletZeroes() { server_.KubeletSetsCapacity(kNode, kGpu, "0"); }
  // The value is back and the reconciler has taken in its own PATCH's
  // answer (it counts patches just before it records the Node as right; the
  // next reset needs that record to count as one).
  bool Repaired() {
    ++patches_;
    return WaitFor(
        [&] {
          return server_.Capacity(kNode, kGpu) == "4" &&
                 reconciler_->stats().patches.load() >= patches_;
        },
        seconds(5));
  }

  ApiServerStub server_;
  FakeClock clock_;
  uint64_t patches_ = 0;  // PATCHes the reconciler should have sent so far
  std::unique_ptr<CapacityReconciler> reconciler_;  // last: stopped first
};

// Three resets spread over more than the fight window are three repairs,
// not a fight: the oldest has left the window when the third comes.
TEST_F(ReconcilerClockTest, ResetsFurtherApartThanTheWindowAreRepairedEveryTime) {
  for (int i = 0; i < 4; ++i) {
    KubeletZeroes();
    ASSERT_TRUE(Repaired()) << "reset " << i << " was not repaired";
    clock_.Advance(seconds(61));
  }
  EXPECT_EQ(reconciler_->stats().fights.load(), 0u);
  EXPECT_GE(reconciler_->stats().drift_repairs.load(), 4u);
}

// Three resets within the window are a fight: the third is left alone
// (the agent says so instead of fighting forever), and a value that changes
// for a real reason (new desired count) is written again.
TEST_F(ReconcilerClockTest, ResetsWithinTheWindowAreAFight) {
  for (int i = 0; i < 2; ++i) {
    KubeletZeroes();
    ASSERT_TRUE(Repaired()) << "reset " << i << " was not repaired";
    clock_.Advance(seconds(50));
  }
  KubeletZeroes();
  ASSERT_TRUE(WaitFor([&] { return reconciler_->stats().fights.load() == 1; }))
      << "three resets in 100 s of a 120 s window were not taken for a fight";
  EXPECT_EQ(server_.Capacity(kNode, kGpu), "0");
  reconciler_->SetDesired(apiserver::Capacities{{kGpu, 3}});
  EXPECT_TRUE(WaitFor([&] { return server_.Capacity(kNode, kGpu) == "3"; }));
}

}  // namespace
}  // namespace gpu_agent
