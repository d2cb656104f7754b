// NvmlLibrary::Open's errors. A test binary of its own: a library loaded
// by an earlier test in the process would answer dlopen by its SONAME.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "nvml/nvml_library.h"
#include "support/test_support.h"

namespace gpu_agent::nvml {
namespace {

using gpu_agent::testing::TempDir;

// A libnvidia-ml.so.1 that is there but cannot load (a dependency is on no
// path) is named with the loader's reason, not reported missing.
TEST(NvmlOpenTest, AFoundLibraryThatCannotLoadSaysWhy) {
  if (NvmlLibrary::Open("/").ok()) GTEST_SKIP() << "this machine's loader finds a real NVML";
  TempDir dir;
  std::error_code ec;
  std::filesystem::create_directories(dir.Join("root/usr/lib64"), ec);
  std::filesystem::copy_file(NVML_NEEDING_GONE, dir.Join("root/usr/lib64/libnvidia-ml.so.1"), ec);
  ASSERT_FALSE(ec) << ec.message();
  auto lib = NvmlLibrary::Open(dir.Join("root"));
  ASSERT_FALSE(lib.ok());
  const std::string msg(lib.status().message());
  EXPECT_NE(msg.find("found but not loadable"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.Join("root/usr/lib64/libnvidia-ml.so.1") + " (libgone_library.so"),
            std::string::npos)
      << msg;
  // Absent everywhere: "not found", and no reason for a file that is not there.
  auto none = NvmlLibrary::Open(dir.Join("empty"));
  ASSERT_FALSE(none.ok());
  const std::string absent(none.status().message());
  EXPECT_NE(absent.find("libnvidia-ml.so.1 not found; looked in: " + dir.Join("empty/usr/lib64") +
                        "/libnvidia-ml.so.1, "),
            std::string::npos)
      << absent;
}

}  // namespace
}  // namespace gpu_agent::nvml
