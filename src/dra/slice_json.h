// Reading ResourceSlices as the publisher holds them (dra-internal: the
// slice publisher's files share it).
#ifndef GPU_AGENT_DRA_SLICE_JSON_H_
#define GPU_AGENT_DRA_SLICE_JSON_H_

#include <rapidjson/document.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/json.h"

namespace gpu_agent::dra {

// v[a][b] as a string; empty when absent or not a string.
std::string StringAt(const rapidjson::Value& v, const char* a, const char* b);
// A slice as the publisher holds it: JSON this process wrote, or that it
// re-serialised after a bounded parse (base/json), so parsing it again
// cannot fail on depth or size. Unparseable text reads as null.
std::unique_ptr<json::Document> ParseHeld(const std::string& text);
// spec[key] as a string.
std::string SpecString(const rapidjson::Value& slice, const char* key);
// spec.pool.generation; 0 when absent.
int64_t PoolGeneration(const rapidjson::Value& slice);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_SLICE_JSON_H_
