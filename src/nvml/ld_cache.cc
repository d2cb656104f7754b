#include "nvml/ld_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "base/strings.h"

namespace gpu_agent::nvml {
namespace {

constexpr std::string_view kOldMagic = "ld.so-1.7.0";
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
// The new header: magic and version (20 bytes), nlibs, len_strings, flags
// (1 byte, 3 padding), extension_offset, 3 unused words.
constexpr size_t kNewHeader = 48;
constexpr size_t kNewEntry = 24;   // flags, key, value, osversion (4 each), hwcap (8)
constexpr size_t kOldHeader = 16;  // magic (11 bytes, padded to 12), nlibs
constexpr size_t kOldEntry = 12;   // flags, key, value

// The entry flags: the type in the low byte, the architecture above it.
constexpr uint32_t kTypeMask = 0x00ff;
constexpr uint32_t kElfLibc6 = 0x0003;
constexpr uint32_t kArchMask = 0xff00;
#if defined(__x86_64__)
constexpr uint32_t kArch = 0x0300;
#elif defined(__aarch64__)
constexpr uint32_t kArch = 0x0a00;
#else
constexpr uint32_t kArch = 0xffff;  // no libraries of another machine
#endif

uint32_t U32(std::string_view data, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, data.data() + at, sizeof v);
  return v;
}

// The NUL-ended string at `offset` of `data`; false past its end.
bool StringAt(std::string_view data, uint32_t offset, std::string* out) {
  if (offset >= data.size()) return false;
  const size_t end = data.find('\0', offset);
  if (end == std::string_view::npos) return false;
  *out = std::string(data.substr(offset, end - offset));
  return true;
}

}  // namespace

std::vector<LdCacheEntry> ParseLdCache(std::string_view data, std::string* error) {
  std::string ignored;
  std::string& why = error != nullptr ? *error : ignored;
  std::vector<LdCacheEntry> out;
  // The new table is alone, or follows the old one (at an 8-byte boundary).
  size_t base = 0;
  if (data.substr(0, kOldMagic.size()) == kOldMagic) {
    if (data.size() < kOldHeader) {
      why = "the old-format table is cut short";
      return out;
    }
    const uint64_t old_end = kOldHeader + uint64_t{U32(data, 12)} * kOldEntry;
    base = static_cast<size_t>((old_end + 7) & ~uint64_t{7});
    if (base > data.size()) {
      why = "the old-format table runs past the end of the file";
      return out;
    }
  }
  const std::string_view cache = data.substr(base);
  if (cache.size() < kNewHeader || cache.substr(0, kNewMagic.size()) != kNewMagic) {
    why = StrCat("not a glibc ld.so.cache (no \"", kNewMagic, "\" table)");
    return out;
  }
  const uint32_t nlibs = U32(cache, 20);
  if (uint64_t{nlibs} * kNewEntry > cache.size() - kNewHeader) {
    why = StrCat("the cache says ", nlibs, " libraries, more than its ", cache.size(),
                 " bytes can hold");
    return out;
  }
  for (uint32_t i = 0; i < nlibs; ++i) {
    const size_t at = kNewHeader + size_t{i} * kNewEntry;
    const uint32_t flags = U32(cache, at);
    if ((flags & kTypeMask) != kElfLibc6 || (flags & kArchMask) != kArch) continue;
    LdCacheEntry e;
    // Offsets are from the start of the new table.
    if (!StringAt(cache, U32(cache, at + 4), &e.soname) ||
        !StringAt(cache, U32(cache, at + 8), &e.path)) {
      why = StrCat("entry ", i, " points past the end of the file");
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<LdCacheEntry> ReadLdCache(const std::string& file, std::string* error) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (error != nullptr) *error = StrCat("cannot read ", file);
    return {};
  }
  // A real cache is well under a few MiB; read at most 64 MiB of it.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0);
  std::string data(static_cast<size_t>(std::clamp<std::streamoff>(size, 0, 64 << 20)), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  return ParseLdCache(data, error);
}

}  // namespace gpu_agent::nvml
