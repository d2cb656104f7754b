// The loader-cache reader against caches the real ldconfig writes, and
// against broken ones.
#include "nvml/ld_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "nvml/nvml_library.h"
#include "support/test_support.h"

namespace gpu_agent::nvml {
namespace {

using gpu_agent::testing::FakeNvmlDir;
using gpu_agent::testing::TempDir;

// ldconfig from the usual places, or "" where there is none.
std::string Ldconfig() {
  for (const char* p : {"/sbin/ldconfig", "/usr/sbin/ldconfig"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

// A root whose loader cache, written by the real ldconfig inside it (-r),
// lists the NVML stand-in (a real ELF with SONAME libnvidia-ml.so.1) in
// /usr/local/nvidia/lib64, as a driver container's root has it.
bool MakeDriverContainerRoot(const TempDir& dir, std::string* why) {
  namespace fs = std::filesystem;
  const std::string lib = dir.Join("root/usr/local/nvidia/lib64");
  std::error_code ec;
  fs::create_directories(lib, ec);
  fs::create_directories(dir.Join("root/etc"), ec);
  fs::copy_file(FakeNvmlDir() + "/libnvidia-ml.so.1", lib + "/libnvidia-ml.so.580.159.04", ec);
  if (ec) {
    *why = "cannot copy the NVML stand-in: " + ec.message();
    return false;
  }
  dir.Write("root/etc/ld.so.conf", "/usr/local/nvidia/lib64\n");
  const std::string cmd = Ldconfig() + " -r " + dir.Join("root") + " 2>" + dir.Join("ldconfig.err");
  if (std::system(cmd.c_str()) != 0) {
    *why = "ldconfig -r failed: " + gpu_agent::testing::ReadFile(dir.Join("ldconfig.err"));
    return false;
  }
  return true;
}

class LdCacheRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Ldconfig().empty()) GTEST_SKIP() << "no ldconfig here";
    if (::geteuid() != 0) GTEST_SKIP() << "ldconfig -r needs root (it chroots)";
    std::string why;
    ASSERT_TRUE(MakeDriverContainerRoot(dir_, &why)) << why;
  }
  TempDir dir_;
};

TEST_F(LdCacheRealTest, ReadsWhatLdconfigWrote) {
  std::string error;
  const auto entries = ReadLdCache(dir_.Join("root/etc/ld.so.cache"), &error);
  EXPECT_EQ(error, "");
  bool found = false;
  for (const LdCacheEntry& e : entries) {
    if (e.soname == "libnvidia-ml.so.1") {
      found = true;
      EXPECT_EQ(e.path, "/usr/local/nvidia/lib64/libnvidia-ml.so.1");
    }
  }
  EXPECT_TRUE(found) << entries.size() << " entries, none libnvidia-ml.so.1";
}

TEST_F(LdCacheRealTest, DriverFoldersAddTheCachesNvmlFolderAfterTheUsualOnes) {
  const auto folders = DriverLibraryFolders(dir_.Join("root"));
  ASSERT_FALSE(folders.empty());
  EXPECT_EQ(folders.front(), "/usr/lib64");
  EXPECT_EQ(folders.back(), "/usr/local/nvidia/lib64");
  // Without a cache, only the usual ones.
  const auto plain = DriverLibraryFolders(dir_.Join("nowhere"));
  EXPECT_EQ(plain.size() + 1, folders.size());
}

TEST_F(LdCacheRealTest, NvmlOpensFromTheCachesFolderUnderAnotherRoot) {
  auto lib = NvmlLibrary::Open(dir_.Join("root"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_EQ((*lib)->path(), dir_.Join("root/usr/local/nvidia/lib64/libnvidia-ml.so.1"));
}

// A cache made by hand: the new table alone, or after an old one.
std::string MakeCache(uint32_t flags, const std::string& soname, const std::string& path,
                      bool old_table_first) {
  std::string strings = soname + '\0' + path + '\0';
  std::string t(48 + 24, '\0');
  std::memcpy(t.data(), "glibc-ld.so.cache1.1", 20);
  const uint32_t nlibs = 1, len = static_cast<uint32_t>(strings.size());
  std::memcpy(t.data() + 20, &nlibs, 4);
  std::memcpy(t.data() + 24, &len, 4);
  const uint32_t key = 72, value = static_cast<uint32_t>(72 + soname.size() + 1);
  std::memcpy(t.data() + 48, &flags, 4);
  std::memcpy(t.data() + 52, &key, 4);
  std::memcpy(t.data() + 56, &value, 4);
  t += strings;
  if (!old_table_first) return t;
  std::string old(16 + 12, '\0');  // one old entry, then padding to 8
  std::memcpy(old.data(), "ld.so-1.7.0", 11);
  std::memcpy(old.data() + 12, &nlibs, 4);
  old.resize(32, '\0');
  return old + t;
}

#if defined(__x86_64__)
constexpr uint32_t kThisMachine = 0x0303;
constexpr uint32_t kOtherMachine = 0x0a03;  // aarch64
#else
constexpr uint32_t kThisMachine = 0x0a03;
constexpr uint32_t kOtherMachine = 0x0303;
#endif

TEST(LdCacheTest, ReadsTheNewTableAloneAndAfterTheOldOne) {
  for (bool old_first : {false, true}) {
    std::string error;
    auto e = ParseLdCache(
        MakeCache(kThisMachine, "libcuda.so.1", "/opt/nv/libcuda.so.1", old_first), &error);
    ASSERT_EQ(e.size(), 1u) << error;
    EXPECT_EQ(e[0].soname, "libcuda.so.1");
    EXPECT_EQ(e[0].path, "/opt/nv/libcuda.so.1");
  }
}

TEST(LdCacheTest, SkipsAnotherMachinesLibraries) {
  EXPECT_TRUE(
      ParseLdCache(MakeCache(kOtherMachine, "libcuda.so.1", "/x/libcuda.so.1", false)).empty());
}

TEST(LdCacheTest, BrokenCachesGiveNothingAndSayWhy) {
  const std::string good = MakeCache(kThisMachine, "libcuda.so.1", "/x/libcuda.so.1", false);
  struct Case {
    std::string name, data, why;
  };
  std::string many = good;
  const uint32_t huge = 0x10000000;
  std::memcpy(many.data() + 20, &huge, 4);
  std::string past = good;
  const uint32_t far = 0x7fffffff;
  std::memcpy(past.data() + 52, &far, 4);
  std::string unended = good.substr(0, good.size() - 1);  // the last string has no NUL
  std::string old_only(16, '\0');
  std::memcpy(old_only.data(), "ld.so-1.7.0", 11);
  std::memcpy(old_only.data() + 12, &huge, 4);
  for (const Case& c : std::initializer_list<Case>{
           {"empty", "", "not a glibc ld.so.cache"},
           {"garbage", std::string(100, 'x'), "not a glibc ld.so.cache"},
           {"header cut short", good.substr(0, 30), "not a glibc ld.so.cache"},
           {"more entries than bytes", many, "more than its"},
           {"offset past the end", past, "points past the end"},
           {"string without its NUL", unended, "points past the end"},
           {"old table past the end", old_only, "runs past the end"},
       }) {
    std::string error;
    EXPECT_TRUE(ParseLdCache(c.data, &error).empty()) << c.name;
    EXPECT_NE(error.find(c.why), std::string::npos) << c.name << ": " << error;
  }
  std::string error;
  EXPECT_TRUE(ReadLdCache("/nonexistent/ld.so.cache", &error).empty());
  EXPECT_NE(error.find("cannot read /nonexistent/ld.so.cache"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpu_agent::nvml
