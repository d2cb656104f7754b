// Kubernetes rules for extended resource names (`<domain>/<name>`), shared by
// plugin mode (Register) and static mode (Node capacity keys).
#ifndef GPU_AGENT_BASE_RESOURCE_NAME_H_
#define GPU_AGENT_BASE_RESOURCE_NAME_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace gpu_agent {

// Under migStrategy mixed, each MIG profile is its own resource:
// nvidia.com/mig-<profile>, e.g. nvidia.com/mig-1g.10gb.
inline constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";

// OK when `name` is a valid extended resource name: a DNS-subdomain prefix
// outside kubernetes.io, a '/', and a name part of at most 63 characters of
// [A-Za-z0-9._-] that starts and ends alphanumeric; not under `requests.`.
// The error says which rule failed.
absl::Status ValidateExtendedResourceName(std::string_view name);

// The longest RFC 1123 DNS subdomain, so the longest name of most
// Kubernetes objects (Nodes, ResourceSlices).
inline constexpr size_t kMaxDnsSubdomain = 253;

// OK when `s` is an RFC 1123 DNS subdomain: dot-separated labels of
// lowercase letters, digits and '-', each starting and ending with a letter
// or digit, at most 253 characters. The error starts with `what`.
absl::Status ValidateDnsSubdomain(std::string_view what, std::string_view s);

// OK when `name` is a valid Node name (RFC 1123 DNS subdomain).
absl::Status ValidateNodeName(std::string_view name);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_RESOURCE_NAME_H_
