// NVML inside the test process: a fixture's GPUs held in memory and served
// through the agent's own function table (nvml::NvmlFunctions), so unit
// tests of src/nvml run without dlopen and without the libnvidia-ml
// stand-in. It answers as the stand-in does for the same fixture
// (fixture.h; format: tests/fixtures/nvml/README.md) for every query
// inventory discovery makes. It has no events, no repair-state queries and
// no control FIFO: health tests use the stand-in.
#ifndef GPU_AGENT_TESTS_DOUBLES_NVML_IN_PROCESS_NVML_H_
#define GPU_AGENT_TESTS_DOUBLES_NVML_IN_PROCESS_NVML_H_

#include <memory>

#include "fixture.h"
#include "nvml/nvml_library.h"

namespace fake_nvml {

struct InProcessNvmlState;  // the fixture's devices and NVML's init count

class InProcessNvml {
 public:
  // The table's entries are plain C functions, so they reach the fake
  // through one process-wide pointer. REQUIRES: no other InProcessNvml
  // alive. Not thread-safe: one test thread drives it.
  explicit InProcessNvml(Fixture fixture);
  ~InProcessNvml();
  InProcessNvml(const InProcessNvml&) = delete;
  InProcessNvml& operator=(const InProcessNvml&) = delete;

  // A library over this fake's table, as NvmlLibrary::Open gives one over
  // libnvidia-ml. It must not outlive the fake.
  std::unique_ptr<gpu_agent::nvml::NvmlLibrary> Library() const;
  static const gpu_agent::nvml::NvmlFunctions& Functions();

 private:
  std::unique_ptr<InProcessNvmlState> state_;
};

}  // namespace fake_nvml

#endif  // GPU_AGENT_TESTS_DOUBLES_NVML_IN_PROCESS_NVML_H_
