// The dlopen NVML stand-in loaded in this process from a driver root made in
// a test's folder, with its control FIFO: what the health watcher's tests
// run against.
#ifndef GPU_AGENT_TESTS_NVML_STAND_IN_NVML_H_
#define GPU_AGENT_TESTS_NVML_STAND_IN_NVML_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nvml/inventory.h"
#include "nvml/nvml_library.h"
#include "support/test_support.h"

namespace gpu_agent::nvml {

struct StandInNvml {
  std::shared_ptr<const NvmlLibrary> lib;
  std::vector<std::string> uuids;  // every GPU's, in index order
  std::string ctl;                 // the control FIFO (FAKE_NVML_CONTROL)
};

// Serves `fixture` (a name under tests/fixtures/nvml) from `dir`; fails the
// calling test where NVML does not start.
//
// The stand-in is loaded once per process and keeps its state (GPUs lost,
// XIDs' effects, failures injected) across a shutdown while the fixture's
// path stays the same; it reads its fixture afresh only at an init that
// names another. So each caller serves its own copy, under `dir`: a case
// starts on the fixture as written, whatever the case before it did.
inline void OpenStandInNvml(const gpu_agent::testing::TempDir& dir, const std::string& fixture,
                            StandInNvml* out) {
  std::filesystem::create_directories(dir.Join("usr/lib64"));
  std::filesystem::create_symlink(gpu_agent::testing::FakeNvmlDir() + "/libnvidia-ml.so.1",
                                  dir.Join("usr/lib64/libnvidia-ml.so.1"));
  const std::string own = dir.Write(
      "fixture.yaml", gpu_agent::testing::ReadFile(gpu_agent::testing::FixturePath(fixture)));
  ::setenv("FAKE_NVML_FIXTURE", own.c_str(), 1);
  out->ctl = dir.Join("ctl");
  ::setenv("FAKE_NVML_CONTROL", out->ctl.c_str(), 1);
  auto lib = NvmlLibrary::Open(dir.path());
  ASSERT_TRUE(lib.ok()) << lib.status();
  ASSERT_TRUE((*lib)->Init().ok());
  out->lib = std::shared_ptr<const NvmlLibrary>(std::move(*lib));
  auto inv = DiscoverInventory(*out->lib, "/nonexistent");
  ASSERT_TRUE(inv.ok());
  for (const auto& g : inv->gpus) out->uuids.push_back(g.uuid);
}

}  // namespace gpu_agent::nvml

#endif  // GPU_AGENT_TESTS_NVML_STAND_IN_NVML_H_
