// MIG profile names against NVIDIA's own: the profiles of NVIDIA's MIG user
// guide ("Supported MIG Profiles": A100, A30, H100) with the memory sizes
// NVML reports for them, named with and without NVML's profile names and
// with and without the parent's memory (which needs privilege in MIG mode).
#include "nvml/mig_profile.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpu_agent::nvml {
namespace {

struct Row {
  std::string name;  // NVIDIA's name, as nvidia-smi mig -lgip prints it
  unsigned id;
  unsigned slices;
  uint64_t memory_mib;
  unsigned decoders, jpegs, ofas;
};

// H100 80GB: `nvidia-smi mig -lgip` (memory in GiB: 9.75, 19.62, 39.50,
// 79.25; times 1024 here, as NVML's memorySizeMB gives them).
const std::vector<Row> kH100_80 = {
    {"1g.10gb", 19, 1, 9984, 1, 1, 0},  {"1g.10gb+me", 20, 1, 9984, 1, 1, 1},
    {"1g.20gb", 15, 1, 20096, 1, 1, 0}, {"2g.20gb", 14, 2, 20096, 2, 2, 0},
    {"3g.40gb", 9, 3, 40448, 3, 3, 0},  {"4g.40gb", 5, 4, 40448, 4, 4, 0},
    {"7g.80gb", 0, 7, 81152, 7, 7, 1},
};
constexpr uint64_t kH100_80Total = 81559;  // nvidia-smi: 81559MiB

// A100 40GB: memory 1/8, 1/8, 2/8, 4/8, 4/8, full (MIG user guide); sizes
// a little under each share, as NVML reports profile memory.
const std::vector<Row> kA100_40 = {
    {"1g.5gb", 19, 1, 4864, 0, 0, 0},  {"1g.5gb+me", 20, 1, 4864, 1, 1, 1},
    {"2g.10gb", 14, 2, 9984, 1, 0, 0}, {"3g.20gb", 9, 3, 20096, 2, 0, 0},
    {"4g.20gb", 5, 4, 20096, 2, 0, 0}, {"7g.40gb", 0, 7, 40448, 5, 1, 1},
};

// A30 24GB: memory 1/4, 1/4, 2/4, 2/4, full (MIG user guide); sizes as above.
const std::vector<Row> kA30 = {
    {"1g.6gb", 14, 1, 5952, 0, 0, 0},  {"1g.6gb+me", 21, 1, 5952, 1, 1, 1},
    {"2g.12gb", 5, 2, 12032, 2, 0, 0}, {"2g.12gb+me", 6, 2, 12032, 2, 1, 1},
    {"4g.24gb", 0, 4, 24192, 4, 1, 1},
};

GpuRecord Parent(const std::vector<Row>& rows, bool nvml_names, uint64_t total_mib) {
  GpuRecord g;
  g.mig_enabled = true;
  g.memory_mib = total_mib;  // 0: NVML answered NO_PERMISSION
  for (const Row& r : rows) {
    GpuInstanceProfile p;
    p.id = r.id;
    p.slices = r.slices;
    p.memory_mib = r.memory_mib;
    p.decoders = r.decoders;
    p.jpegs = r.jpegs;
    p.ofas = r.ofas;
    if (nvml_names) p.name = "MIG " + r.name;
    g.mig_profiles.push_back(p);
  }
  return g;
}

MigRecord Device(const Row& r, unsigned compute_slices = 0) {
  MigRecord m;
  m.gpu_instance_slices = r.slices;
  m.compute_instance_slices = compute_slices ? compute_slices : r.slices;
  m.memory_mib = r.memory_mib;
  m.decoders = r.decoders;
  m.jpegs = r.jpegs;
  m.ofas = r.ofas;
  return m;
}

// What the agent serves: the name without "+me" ('+' cannot be in a
// resource name).
std::string Served(const std::string& name) { return name.substr(0, name.find('+')); }

struct Case {
  const char* what;
  bool nvml_names;
  bool parent_memory;  // privileged: nvmlDeviceGetMemoryInfo answers for the parent
};

TEST(MigProfileNameTest, EveryDocumentedProfileOnEveryPath) {
  const struct {
    const char* gpu;
    const std::vector<Row>* rows;
    uint64_t total;
  } gpus[] = {{"H100 80GB", &kH100_80, kH100_80Total},
              {"A100 40GB", &kA100_40, 40536},
              {"A30 24GB", &kA30, 24258}};
  const Case cases[] = {{"NVML's names, unprivileged", true, false},
                        {"NVML's names, privileged", true, true},
                        {"no names (before R510), unprivileged", false, false},
                        {"no names (before R510), privileged", false, true}};
  for (const auto& gpu : gpus) {
    for (const Case& c : cases) {
      const GpuRecord parent = Parent(*gpu.rows, c.nvml_names, c.parent_memory ? gpu.total : 0);
      for (const Row& r : *gpu.rows) {
        EXPECT_EQ(MigProfileName(parent, Device(r)), Served(r.name))
            << gpu.gpu << ", " << c.what << ", profile id " << r.id;
      }
    }
  }
}

TEST(MigProfileNameTest, ComputeInstancesSmallerThanTheirGpuInstance) {
  for (bool names : {true, false}) {
    const GpuRecord h100 = Parent(kH100_80, names, 0);
    EXPECT_EQ(MigProfileName(h100, Device(kH100_80[4], 1)), "1c.3g.40gb") << names;
    EXPECT_EQ(MigProfileName(h100, Device(kH100_80[6], 2)), "2c.7g.80gb") << names;
    const GpuRecord a100 = Parent(kA100_40, names, 0);
    EXPECT_EQ(MigProfileName(a100, Device(kA100_40[3], 1)), "1c.3g.20gb") << names;
  }
}

// Names NVML gives win over the arithmetic; ones that do not read like a
// profile name are not trusted.
TEST(MigProfileNameTest, NvmlNamesWinAndOddOnesAreIgnored) {
  GpuRecord parent = Parent(kH100_80, true, 0);
  parent.mig_profiles[0].name = "MIG 1g.12gb";  // as a driver for another board would say
  EXPECT_EQ(MigProfileName(parent, Device(kH100_80[0])), "1g.12gb");
  parent.mig_profiles[0].name = "MIG 1g.12gb-me";  // Blackwell's suffix stays
  EXPECT_EQ(MigProfileName(parent, Device(kH100_80[0])), "1g.12gb-me");
  for (const char* odd : {"", "MIG", "2g.10gb", "MIG 1g.gb", "MIG 1g.10gb extra", "1g.10GB"}) {
    parent.mig_profiles[0].name = odd;
    parent.mig_profiles[1].name = odd;
    EXPECT_EQ(MigProfileName(parent, Device(kH100_80[0])), "1g.10gb") << odd;
  }
}

TEST(MigProfileNameTest, TooLittleToNameIt) {
  const GpuRecord bare;  // no profiles, no memory
  EXPECT_EQ(MigProfileName(bare, Device(kH100_80[0])), "");
  const GpuRecord h100 = Parent(kH100_80, true, 0);
  MigRecord no_slices = Device(kH100_80[0]);
  no_slices.gpu_instance_slices = 0;
  EXPECT_EQ(MigProfileName(h100, no_slices), "");
  MigRecord no_memory = Device(kH100_80[0]);
  no_memory.memory_mib = 0;
  EXPECT_EQ(MigProfileName(h100, no_memory), "");
}

}  // namespace
}  // namespace gpu_agent::nvml
