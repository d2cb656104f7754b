// Builds a node's CDI spec from plain records: the devices a container can
// be given (each under the names Allocate uses, with its device nodes), the
// driver's version and roots, and the hook tool. Which devices there are,
// and under which names, is decided by the caller (the agent's plan); this
// adds what every GPU container needs: the control device nodes, the
// driver's files and the hooks.
//
// What goes into the container edits follows NVIDIA's generator
// (nvidia-container-toolkit pkg/nvcdi: full-gpu-nvml.go, mig-device-nvml.go,
// driver-nvml.go, management.go) and the CDI specification; see
// driver_files.h for the driver's files.
#ifndef GPU_AGENT_CDI_GENERATOR_H_
#define GPU_AGENT_CDI_GENERATOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cdi/spec.h"

namespace gpu_agent::cdi {

// One GPU or MIG device, as the spec offers it.
struct DeviceEntry {
  std::vector<std::string> names;         // CDI device names, e.g. its UUID and its index
  std::vector<std::string> device_nodes;  // paths under the dev root, e.g. /dev/nvidia0
  std::string what;                       // for messages: "GPU 0 (GPU-...)"
};

struct GeneratorInput {
  std::string kind;            // "<vendor>/<class>"
  std::string driver_version;  // as NVML reports it; the driver's files are found by it
  // Where the driver's libraries may be, inside the driver root.
  std::vector<std::string> library_folders;
  // The driver root and the dev root as the HOST sees them: the spec names
  // host paths under them.
  std::string driver_root = "/";
  std::string dev_root = "/";
  // Where this process sees them; existence is checked there.
  std::string driver_root_here = "/";
  std::string dev_root_here = "/";
  // Where the host's driver root is mounted in this process's container;
  // empty: a host process.
  std::string container_driver_root;
  // nvidia-ctk (or nvidia-cdi-hook) on the host; empty: no hooks.
  std::string hook_tool;
  // Hooks to leave out ("create-symlinks", "update-ldcache"), or "all".
  std::vector<std::string> disabled_hooks;
  std::vector<DeviceEntry> devices;  // at least one
  size_t gpus_listed = 0;            // GPUs NVML lists, for the message when devices is empty
};

struct Generated {
  Spec spec;
  // Things an operator should hear about: hooks not used because the hook
  // tool is not where configured.
  std::vector<std::string> notes;
};

// The spec: one CDI device per name of each entry, plus "all" (every
// entry's nodes). Errors (kNotFound, kFailedPrecondition, kInvalidArgument)
// name the file, device or setting; kNotFound also when `devices` is empty.
absl::StatusOr<Generated> Generate(const GeneratorInput& input);

}  // namespace gpu_agent::cdi

#endif  // GPU_AGENT_CDI_GENERATOR_H_
