#include "cdi/driver_files.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "base/file_util.h"
#include "base/strings.h"

namespace gpu_agent::cdi {
namespace {

// libnvidia-container's utility_libs and compute_libs (src/nvc_info.c).
constexpr const char* kLibraries[] = {
    // utility
    "libnvidia-ml.so",    // management library (NVML)
    "libnvidia-cfg.so",   // GPU configuration
    "libnvidia-nscq.so",  // NVSwitch and GPU topology
    // compute
    "libcuda.so",                    // CUDA driver
    "libcudadebugger.so",            // CUDA debugger
    "libnvidia-opencl.so",           // OpenCL ICD
    "libnvidia-gpucomp.so",          // shared shader compiler
    "libnvidia-ptxjitcompiler.so",   // PTX JIT compiler (used by libcuda)
    "libnvidia-fatbinaryloader.so",  // fatbin loader (older drivers)
    "libnvidia-allocator.so",        // allocator runtime
    "libnvidia-compiler.so",         // NVVM-PTX compiler for OpenCL
    "libnvidia-pkcs11.so",           // confidential computing crypto
    "libnvidia-pkcs11-openssl3.so",  // the same, OpenSSL 3
    "libnvidia-nvvm.so",             // NVVM compiler
};
constexpr const char* kRequired[] = {"libnvidia-ml.so", "libcuda.so"};

// utility_bins and compute_bins (src/nvc_info.c).
constexpr const char* kBinaries[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                     "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"};
constexpr const char* kBinaryFolders[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin",
                                          "/usr/local/bin"};

// The IPC sockets NVIDIA's CDI generator mounts (internal/discover/ipc.go).
constexpr const char* kSockets[] = {"/run/nvidia-persistenced/socket",
                                    "/run/nvidia-fabricmanager/socket"};

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsSocket(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::vector<std::string> ListFolder(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Follows the symbolic link at `link` (inside the root) to what it finally
// names, inside the root: absolute targets are taken inside the root too,
// as the host (or a container with the root at /) reads them. Empty when
// `link` is not a link or the chain is broken or too long.
std::string ResolveInRoot(const std::string& root, std::string link) {
  namespace fs = std::filesystem;
  bool was_link = false;
  for (int hops = 0; hops < 16; ++hops) {
    char buf[4096];
    const ssize_t n = ::readlink(JoinRoot(root, link).c_str(), buf, sizeof buf - 1);
    if (n < 0) return was_link ? fs::path(link).lexically_normal().string() : "";
    was_link = true;
    const std::string target(buf, static_cast<size_t>(n));
    link = target.front() == '/'
               ? target
               : (fs::path(link).parent_path() / target).lexically_normal().string();
  }
  return "";
}

}  // namespace

absl::StatusOr<DriverFiles> FindDriverFiles(const std::string& root, const std::string& version,
                                            const std::vector<std::string>& folders) {
  DriverFiles out;
  for (const char* name : kLibraries) {
    const std::string file = StrCat(name, ".", version);
    // The first folder that has it: on a merged /usr, /lib/x86_64-linux-gnu
    // is the same folder as /usr/lib/x86_64-linux-gnu, searched earlier.
    std::string found;
    for (const std::string& folder : folders) {
      if (IsRegularFile(JoinRoot(root, StrCat(folder, "/", file)))) {
        found = folder;
        break;
      }
    }
    if (found.empty()) {
      if (std::find(std::begin(kRequired), std::end(kRequired), std::string_view(name)) !=
          std::end(kRequired)) {
        return absl::NotFoundError(StrCat(
            "the driver's ", file, " (driver version ", version, " as NVML reports it) is in none ",
            "of ", root, "'s library folders (", StrJoin(folders, ", "),
            "); is flags.nvidiaDriverRoot (and containerDriverRoot in a container) the root the "
            "driver is installed under?"));
      }
      continue;
    }
    DriverLibrary lib{StrCat(found, "/", file), {}};
    for (const std::string& entry : ListFolder(JoinRoot(root, found))) {
      if (entry == file || !entry.starts_with(name)) continue;
      const std::string candidate = StrCat(found, "/", entry);
      if (ResolveInRoot(root, candidate) == lib.path) lib.links.push_back(candidate);
    }
    if (std::find(out.library_folders.begin(), out.library_folders.end(), found) ==
        out.library_folders.end()) {
      out.library_folders.push_back(found);
    }
    out.libraries.push_back(std::move(lib));
  }
  for (const char* name : kBinaries) {
    for (const char* folder : kBinaryFolders) {
      const std::string path = StrCat(folder, "/", name);
      if (IsRegularFile(JoinRoot(root, path))) {
        out.binaries.push_back(path);
        break;
      }
    }
  }
  for (const char* folder : {"/lib/firmware/nvidia/", "/usr/lib/firmware/nvidia/"}) {
    const std::string dir = StrCat(folder, version);
    for (const std::string& entry : ListFolder(JoinRoot(root, dir))) {
      if (entry.starts_with("gsp") && entry.ends_with(".bin")) {
        out.firmware.push_back(StrCat(dir, "/", entry));
      }
    }
    if (!out.firmware.empty()) break;
  }
  for (const char* socket : kSockets) {
    if (IsSocket(JoinRoot(root, socket))) out.sockets.push_back(socket);
  }
  return out;
}

}  // namespace gpu_agent::cdi
