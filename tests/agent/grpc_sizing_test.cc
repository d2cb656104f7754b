// The executable's answer to gRPC's core-count question (agent/grpc_sizing.cc)
// is gRPC's alone: linked into this test as into gpu-agent, it caps
// gpr_cpu_num_cores() while sysconf and std::thread::hardware_concurrency()
// keep the machine's count. CTest runs it with bench/cores_shim.cc reporting
// 16 cores (BENCH_CORES), so the two counts differ even on a 2-core machine.
#include <grpc/support/cpu.h>
#include <gtest/gtest.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace {

TEST(GrpcSizingTest, OnlyGrpcIsToldOfOneCore) {
  const long configured = sysconf(_SC_NPROCESSORS_CONF);
  ASSERT_GE(configured, 1);
  EXPECT_EQ(gpr_cpu_num_cores(), 1u);
  EXPECT_EQ(std::thread::hardware_concurrency(), static_cast<unsigned>(get_nprocs()));
  if (const char* fake = std::getenv("BENCH_CORES")) {
    const long cores = std::atol(fake);
    EXPECT_EQ(configured, cores) << "sysconf is capped for the whole process";
    EXPECT_EQ(sysconf(_SC_NPROCESSORS_ONLN), cores);
    EXPECT_EQ(std::thread::hardware_concurrency(), static_cast<unsigned>(cores));
  }
}

TEST(GrpcSizingTest, CurrentCpuIsAShardOfTheCappedCount) {
  for (int i = 0; i < 1000; ++i) ASSERT_LT(gpr_cpu_current_cpu(), gpr_cpu_num_cores());
}

}  // namespace
