// Finds the NVIDIA driver's user-space files a GPU container needs, in a
// driver root, by the driver version NVML reports: the utility and compute
// libraries (with the links that name them), binaries, GSP firmware and
// the daemons' sockets. File-system reads only.
//
// Which files belong to which capability follows NVIDIA's own lists
// (libnvidia-container src/nvc_info.c: utility_libs, compute_libs,
// utility_bins, compute_bins; nvidia-container-toolkit pkg/nvcdi
// driver-nvml.go for firmware and sockets).
#ifndef GPU_AGENT_CDI_DRIVER_FILES_H_
#define GPU_AGENT_CDI_DRIVER_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpu_agent::cdi {

// Paths are absolute inside the driver root ("/usr/lib64/libcuda.so.550.54.15"):
// the same path in the container, the root joined in front on the host.
struct DriverLibrary {
  std::string path;  // the versioned file, <name>.so.<driver version>
  // Links in the same folder that resolve to it (libcuda.so.1, libcuda.so),
  // sorted: what the loader and build tools look the library up by.
  std::vector<std::string> links;
};

struct DriverFiles {
  std::vector<DriverLibrary> libraries;
  std::vector<std::string> library_folders;  // of the libraries, unique, in order
  std::vector<std::string> binaries;
  std::vector<std::string> firmware;  // /lib/firmware/nvidia/<version>/gsp*.bin
  std::vector<std::string> sockets;   // persistenced, fabric manager
};

// Looks in `root` (the driver root as this process sees it), in `folders`
// (inside the root: those NVML is loaded from, nvml::DriverLibraryFolders).
// libnvidia-ml and libcuda of `version` are required (kNotFound names the
// file and the folders searched); everything else is taken where present.
absl::StatusOr<DriverFiles> FindDriverFiles(const std::string& root, const std::string& version,
                                            const std::vector<std::string>& folders);

}  // namespace gpu_agent::cdi

#endif  // GPU_AGENT_CDI_DRIVER_FILES_H_
