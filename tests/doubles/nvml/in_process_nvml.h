// NVML inside the test process: a fixture's GPUs held in memory and served
// through the agent's own function table (nvml::NvmlFunctions), so unit
// tests of src/nvml run without dlopen and without the libnvidia-ml
// stand-in. It answers as the stand-in does for the same fixture
// (fixture.h; format: tests/fixtures/nvml/README.md) for every query
// inventory discovery makes. It has no events and no control FIFO (Set, Fail and Lose
// change a GPU instead): tests of XID handling use the stand-in.
#ifndef GPU_AGENT_TESTS_DOUBLES_NVML_IN_PROCESS_NVML_H_
#define GPU_AGENT_TESTS_DOUBLES_NVML_IN_PROCESS_NVML_H_

#include <memory>
#include <string>

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

  // Changes GPU `gpu`'s fixture while it runs, as the stand-in's control
  // FIFO does: Set is its "set <gpu> <field> <value>" (false on a bad field
  // or value), Fail its "fail"/"unfail" (code 0), Lose its "lose" without
  // the XID.
  bool Set(unsigned gpu, const std::string& field, const std::string& value);
  void Fail(unsigned gpu, const std::string& function, int code);
  void Lose(unsigned gpu, bool lost);

  // A library over this fake's table, as NvmlLibrary::Open gives one over
  // libnvidia-ml. It must not outlive the fake.
  std::unique_ptr<gpu_agent::nvml::NvmlLibrary> Library() const;
  static const gpu_agent::nvml::NvmlFunctions& Functions();

 private:
  std::unique_ptr<InProcessNvmlState> state_;
};

}  // namespace fake_nvml

#endif  // GPU_AGENT_TESTS_DOUBLES_NVML_IN_PROCESS_NVML_H_
