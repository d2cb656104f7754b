// The agent's version, as `gpu-agent version`, the User-Agent and
// gpu_agent_build_info report it.
#ifndef GPU_AGENT_BASE_VERSION_H_
#define GPU_AGENT_BASE_VERSION_H_

namespace gpu_agent {
// From project(VERSION); defined in version.cc, the one file compiled with it.
extern const char kVersion[];
}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_VERSION_H_
