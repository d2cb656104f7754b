#include "base/version.h"

namespace gpu_agent {
const char kVersion[] = GPU_AGENT_VERSION;
}  // namespace gpu_agent
