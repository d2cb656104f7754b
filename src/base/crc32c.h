// CRC-32C (Castagnoli), the checksum of the DRA checkpoint's slots and the
// hash that keeps a shortened object name unique.
#ifndef GPU_AGENT_BASE_CRC32C_H_
#define GPU_AGENT_BASE_CRC32C_H_

#include <cstdint>
#include <string_view>

namespace gpu_agent {

uint32_t Crc32c(std::string_view data);

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_CRC32C_H_
