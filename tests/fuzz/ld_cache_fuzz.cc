// A root's /etc/ld.so.cache (the driver root's, read to find NVML and the
// driver's libraries): every entry read stays inside the input.
#include "fuzz_support.h"
#include "nvml/ld_cache.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string error;
  const std::string_view input = fuzz::AsView(data, size);
  for (const nvml::LdCacheEntry& e : nvml::ParseLdCache(input, &error)) {
    fuzz::Check(e.soname.size() < size && e.path.size() < size, "an entry longer than its input");
  }
  return 0;
}
