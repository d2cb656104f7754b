// Which of the driver's files FindDriverFiles finds under a fake driver
// root: the utility and compute libraries of the reported version with the
// links that resolve to them (inside the root), the binaries, the GSP
// firmware and the daemons' sockets; a clear error when a required library
// is missing.
#include "cdi/driver_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/strings.h"
#include "support/test_support.h"

namespace gpu_agent::cdi {
namespace {

namespace fs = std::filesystem;
using gpu_agent::testing::TempDir;
using gpu_agent::testing::WriteFakeDriverRoot;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kVersion[] = "550.54.15";
constexpr char kLib[] = "/usr/lib/x86_64-linux-gnu";

std::string InLib(const std::string& name) { return StrCat(kLib, "/", name); }
std::string Versioned(const std::string& name) { return InLib(StrCat(name, ".", kVersion)); }

// "path: link, link" per library.
std::vector<std::string> Summary(const DriverFiles& f) {
  std::vector<std::string> out;
  for (const DriverLibrary& l : f.libraries)
    out.push_back(StrCat(l.path, ": ", StrJoin(l.links, ", ")));
  return out;
}

const DriverLibrary* Find(const DriverFiles& f, const std::string& name) {
  for (const DriverLibrary& l : f.libraries) {
    if (l.path.ends_with(StrCat("/", name, ".", kVersion))) return &l;
  }
  return nullptr;
}

class DriverFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(WriteFakeDriverRoot(root_, kVersion)); }

  absl::StatusOr<DriverFiles> FindIn(std::vector<std::string> folders = {kLib}) const {
    return FindDriverFiles(root_, kVersion, folders);
  }
  std::string Here(const std::string& path) const { return root_ + path; }
  void Link(const std::string& target, const std::string& at) const {
    fs::remove(Here(at));
    fs::create_symlink(target, Here(at));
  }
  void File(const std::string& path) const {
    fs::create_directories(fs::path(Here(path)).parent_path());
    std::ofstream(Here(path)) << "placeholder\n";
  }

  TempDir dir_;
  const std::string root_ = dir_.Join("driver");
};

TEST_F(DriverFilesTest, AnInstalledDriversFiles) {
  absl::StatusOr<DriverFiles> f = FindIn();
  ASSERT_TRUE(f.ok()) << f.status();
  // In NVIDIA's order of capabilities; libnvidia-encode (video, not
  // utility or compute) is not taken.
  EXPECT_THAT(
      Summary(*f),
      ElementsAre(
          StrCat(Versioned("libnvidia-ml.so"), ": ", InLib("libnvidia-ml.so"), ", ",
                 InLib("libnvidia-ml.so.1")),
          StrCat(Versioned("libnvidia-cfg.so"), ": ", InLib("libnvidia-cfg.so"), ", ",
                 InLib("libnvidia-cfg.so.1")),
          StrCat(Versioned("libcuda.so"), ": ", InLib("libcuda.so"), ", ", InLib("libcuda.so.1")),
          StrCat(Versioned("libcudadebugger.so"), ": ", InLib("libcudadebugger.so.1")),
          StrCat(Versioned("libnvidia-opencl.so"), ": ", InLib("libnvidia-opencl.so.1")),
          StrCat(Versioned("libnvidia-gpucomp.so"), ": "),
          StrCat(Versioned("libnvidia-ptxjitcompiler.so"), ": ",
                 InLib("libnvidia-ptxjitcompiler.so"), ", ",
                 InLib("libnvidia-ptxjitcompiler.so.1")),
          StrCat(Versioned("libnvidia-allocator.so"), ": ", InLib("libnvidia-allocator.so"), ", ",
                 InLib("libnvidia-allocator.so.1")),
          StrCat(Versioned("libnvidia-pkcs11-openssl3.so"), ": "),
          StrCat(Versioned("libnvidia-nvvm.so"), ": ", InLib("libnvidia-nvvm.so"), ", ",
                 InLib("libnvidia-nvvm.so.4"))));
  EXPECT_THAT(f->library_folders, ElementsAre(kLib));
  EXPECT_THAT(f->binaries,
              ElementsAre("/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump",
                          "/usr/bin/nvidia-persistenced", "/usr/bin/nvidia-cuda-mps-control",
                          "/usr/bin/nvidia-cuda-mps-server"));
  EXPECT_THAT(f->firmware,
              ElementsAre(StrCat("/lib/firmware/nvidia/", kVersion, "/gsp_ga10x.bin"),
                          StrCat("/lib/firmware/nvidia/", kVersion, "/gsp_tu10x.bin")));
  EXPECT_THAT(f->sockets, IsEmpty());
}

TEST_F(DriverFilesTest, ARequiredLibraryMissingIsAnErrorNamingItAndTheFolders) {
  for (const char* required : {"libnvidia-ml.so", "libcuda.so"}) {
    TempDir other;
    const std::string root = other.Join("driver");
    ASSERT_TRUE(WriteFakeDriverRoot(root, kVersion));
    fs::remove(root + Versioned(required));
    absl::StatusOr<DriverFiles> f = FindDriverFiles(root, kVersion, {"/usr/lib64", kLib});
    ASSERT_FALSE(f.ok()) << required;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(std::string(f.status().message()),
              StrCat("the driver's ", required, ".", kVersion, " (driver version ", kVersion,
                     " as NVML reports it) is in none of ", root,
                     "'s library folders (/usr/lib64, ", kLib,
                     "); is flags.nvidiaDriverRoot (and containerDriverRoot in a container) the "
                     "root the driver is installed under?"));
  }
  // A version other than the files': nothing of it is there.
  absl::StatusOr<DriverFiles> f = FindDriverFiles(root_, "550.90.07", {kLib});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(std::string(f.status().message()).substr(0, 48),
            "the driver's libnvidia-ml.so.550.90.07 (driver v");
}

TEST_F(DriverFilesTest, AnOptionalLibraryMissingIsLeftOut) {
  fs::remove(Here(Versioned("libnvidia-opencl.so")));
  fs::remove(Here(Versioned("libcudadebugger.so")));
  absl::StatusOr<DriverFiles> f = FindIn();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Find(*f, "libnvidia-opencl.so"), nullptr);
  EXPECT_EQ(Find(*f, "libcudadebugger.so"), nullptr);
  EXPECT_NE(Find(*f, "libcuda.so"), nullptr);
  EXPECT_EQ(f->libraries.size(), 8u);
}

TEST_F(DriverFilesTest, EachLibraryFromTheFirstFolderThatHasIt) {
  // libcuda also in /usr/lib64, searched first; the rest only in kLib.
  File(StrCat("/usr/lib64/libcuda.so.", kVersion));
  Link(StrCat("libcuda.so.", kVersion), "/usr/lib64/libcuda.so.1");
  absl::StatusOr<DriverFiles> f = FindIn({"/usr/lib64", kLib, "/no/such/folder"});
  ASSERT_TRUE(f.ok()) << f.status();
  const DriverLibrary* cuda = Find(*f, "libcuda.so");
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->path, StrCat("/usr/lib64/libcuda.so.", kVersion));
  EXPECT_THAT(cuda->links, ElementsAre("/usr/lib64/libcuda.so.1"));
  EXPECT_EQ(Find(*f, "libnvidia-ml.so")->path, Versioned("libnvidia-ml.so"));
  // In the order the libraries were found, each once.
  EXPECT_THAT(f->library_folders, ElementsAre(kLib, "/usr/lib64"));
}

TEST_F(DriverFilesTest, LinksResolveInsideTheRootAndOnlyToTheFileCount) {
  // An absolute link, as some packages make, names a path inside the root
  // (here a link there, which the host does not have).
  Link(InLib("libcuda.so.1"), InLib("libcuda.so"));
  // A chain: libcuda.so.2 -> libcuda.so.1 -> the file.
  Link("libcuda.so.1", InLib("libcuda.so.2"));
  // Left from an older driver: a link to another version's file.
  File(InLib("libcuda.so.470.82.01"));
  Link("libcuda.so.470.82.01", InLib("libcuda.so.470"));
  // Broken, and a loop.
  Link("libcuda.so.gone", InLib("libcuda.so.broken"));
  Link("libcuda.so.loop-b", InLib("libcuda.so.loop-a"));
  Link("libcuda.so.loop-a", InLib("libcuda.so.loop-b"));
  absl::StatusOr<DriverFiles> f = FindIn();
  ASSERT_TRUE(f.ok()) << f.status();
  const DriverLibrary* cuda = Find(*f, "libcuda.so");
  ASSERT_NE(cuda, nullptr);
  EXPECT_THAT(cuda->links,
              ElementsAre(InLib("libcuda.so"), InLib("libcuda.so.1"), InLib("libcuda.so.2")));
}

TEST_F(DriverFilesTest, BinariesFromTheFirstFolderThatHasThemAsFiles) {
  fs::remove(Here("/usr/bin/nvidia-smi"));
  File("/usr/sbin/nvidia-smi");
  File("/usr/local/bin/nvidia-smi");  // later in the search: not taken
  fs::remove(Here("/usr/bin/nvidia-debugdump"));
  fs::create_directories(Here("/usr/bin/nvidia-debugdump"));  // a folder is not a binary
  fs::remove(Here("/usr/bin/nvidia-cuda-mps-server"));
  absl::StatusOr<DriverFiles> f = FindIn();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(f->binaries, ElementsAre("/usr/sbin/nvidia-smi", "/usr/bin/nvidia-persistenced",
                                       "/usr/bin/nvidia-cuda-mps-control"));
}

TEST_F(DriverFilesTest, FirmwareOfTheVersionOnlyFromOneFolder) {
  const std::string lib_fw = StrCat("/lib/firmware/nvidia/", kVersion);
  File(StrCat(lib_fw, "/README"));                                        // not gsp*.bin
  File("/lib/firmware/nvidia/535.104.05/gsp_ga10x.bin");                  // another version
  File(StrCat("/usr/lib/firmware/nvidia/", kVersion, "/gsp_gh100.bin"));  // /lib has some
  absl::StatusOr<DriverFiles> f = FindIn();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(f->firmware,
              ElementsAre(StrCat(lib_fw, "/gsp_ga10x.bin"), StrCat(lib_fw, "/gsp_tu10x.bin")));

  fs::remove_all(Here(lib_fw));  // then /usr/lib/firmware's
  f = FindIn();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(f->firmware,
              ElementsAre(StrCat("/usr/lib/firmware/nvidia/", kVersion, "/gsp_gh100.bin")));
}

TEST_F(DriverFilesTest, SocketsOnlyWhenTheyAreSockets) {
  fs::create_directories(Here("/run/nvidia-persistenced"));
  const std::string socket_path = Here("/run/nvidia-persistenced/socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  File("/run/nvidia-fabricmanager/socket");  // a plain file: not the daemon's
  absl::StatusOr<DriverFiles> f = FindIn();
  ::close(fd);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(f->sockets, ElementsAre("/run/nvidia-persistenced/socket"));
}

}  // namespace
}  // namespace gpu_agent::cdi
