// A Container Device Interface (CDI) spec as plain records: its name rules,
// the smallest cdiVersion that carries what it uses, and its JSON and YAML
// forms. What goes into it is the agent's business (cdi/generator.h).
//
// Follows the CDI specification (github.com/cncf-tags/container-device-interface,
// SPEC.md) and its reference code: name rules from pkg/parser/parser.go,
// version rules from specs-go/version.go.
#ifndef GPU_AGENT_CDI_SPEC_H_
#define GPU_AGENT_CDI_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gpu_agent::cdi {

struct DeviceNode {
  std::string path;       // in the container, e.g. /dev/nvidia0
  std::string host_path;  // as the runtime sees it; empty: the same as path
};

struct Mount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;  // e.g. ro, nosuid, nodev, bind
};

struct Hook {
  std::string hook_name;  // OCI hook point, e.g. createContainer
  std::string path;       // absolute, on the host
  std::vector<std::string> args;
};

struct ContainerEdits {
  std::vector<std::string> env;  // "NAME=value"
  std::vector<DeviceNode> device_nodes;
  std::vector<Mount> mounts;
  std::vector<Hook> hooks;
};

struct Device {
  std::string name;  // the part after '=' in "<vendor>/<class>=<name>"
  ContainerEdits edits;
};

struct Spec {
  std::string kind;             // "<vendor>/<class>"
  std::vector<Device> devices;  // at least one
  ContainerEdits edits;         // applied when any device of the spec is asked for
};

// Name rules. Vendor and class: a letter first, a letter or digit last,
// letters, digits, '_', '-' and '.' between. A device name may also start
// with a digit and contain ':'. Errors quote the name and say what is wrong.
absl::Status ValidateVendor(std::string_view vendor);
absl::Status ValidateClass(std::string_view cls);
absl::Status ValidateDeviceName(std::string_view name);

// The kind, every device name (unique), absolute paths, at least one device.
absl::Status ValidateSpec(const Spec& spec);

// The smallest cdiVersion whose schema holds what `spec` uses: "0.3.0"
// (the oldest current consumers accept), "0.5.0" for a device name starting
// with a digit or a device node with a hostPath, "0.6.0" for a '.' in the
// class. Older consumers (podman 4.3, containerd 1.7.0) refuse versions
// they do not know, so never more than needed.
std::string MinimumVersion(const Spec& spec);

// The spec with cdiVersion = MinimumVersion(spec); empty fields left out.
std::string RenderJson(const Spec& spec);
std::string RenderYaml(const Spec& spec);

// "<vendor>-<class>.<ext>", the file name CDI's producer API gives a spec
// (ext "json" or "yaml"; consumers read only those two).
std::string SpecFileName(std::string_view kind, std::string_view ext);

}  // namespace gpu_agent::cdi

#endif  // GPU_AGENT_CDI_SPEC_H_
