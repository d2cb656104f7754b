// The agent's version, as `gpu-agent version`, the User-Agent and
// gpu_agent_build_info report it.
#ifndef GPU_AGENT_AGENT_VERSION_H_
#define GPU_AGENT_AGENT_VERSION_H_

namespace gpu_agent {
// Set by CMake from project(VERSION).
inline constexpr const char* kVersion = GPU_AGENT_VERSION;
}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_VERSION_H_
