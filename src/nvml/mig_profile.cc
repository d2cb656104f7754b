#include "nvml/mig_profile.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "base/strings.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::nvml {
namespace {

// Profile indexes probed: nvml.h's NVML_GPU_INSTANCE_PROFILE_COUNT grows
// with each driver (10, then 17 in R590); past the driver's own count NVML
// answers INVALID_ARGUMENT, and a profile the GPU lacks NOT_SUPPORTED.
constexpr unsigned kProfileProbeLimit = 32;

template <typename Info>
GpuInstanceProfile FromInfo(const Info& info) {
  GpuInstanceProfile p;
  p.id = info.id;
  p.slices = info.sliceCount;
  p.memory_mib = info.memorySizeMB;
  p.decoders = info.decoderCount;
  p.encoders = info.encoderCount;
  p.jpegs = info.jpegCount;
  p.ofas = info.ofaCount;
  return p;
}

size_t Digits(std::string_view s, size_t at) {
  size_t end = at;
  while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end;
  return end - at;
}

// "MIG 1g.10gb+me" -> "1g.10gb"; "" unless what is left reads
// "<slices>g.<n>gb", optionally with a "-suffix" (as Blackwell's "-me").
std::string NameFromNvml(std::string_view name, unsigned slices) {
  if (name.rfind("MIG ", 0) == 0) name.remove_prefix(4);
  name = name.substr(0, name.find('+'));
  const std::string g = StrCat(slices, "g.");
  if (name.rfind(g, 0) != 0) return "";
  const size_t gb = Digits(name, g.size());
  if (gb == 0 || name.substr(g.size() + gb, 2) != "gb") return "";
  const std::string_view rest = name.substr(g.size() + gb + 2);
  if (!rest.empty() && rest[0] != '-') return "";
  for (char c : rest) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return "";
  }
  return std::string(name);
}

uint64_t Distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

// The profile `mig` was made from: its slice count, the closest memory
// (within a sixteenth), then the same engines; nullptr when none fits.
const GpuInstanceProfile* MatchProfile(const std::vector<GpuInstanceProfile>& profiles,
                                       const MigRecord& mig) {
  const GpuInstanceProfile* best = nullptr;
  auto engines_differ = [&](const GpuInstanceProfile& p) {
    return p.decoders != mig.decoders || p.encoders != mig.encoders || p.jpegs != mig.jpegs ||
           p.ofas != mig.ofas;
  };
  for (const GpuInstanceProfile& p : profiles) {
    if (p.slices != mig.gpu_instance_slices) continue;
    if (Distance(p.memory_mib, mig.memory_mib) > mig.memory_mib / 16) continue;
    if (best == nullptr) {
      best = &p;
      continue;
    }
    const uint64_t d = Distance(p.memory_mib, mig.memory_mib);
    const uint64_t best_d = Distance(best->memory_mib, mig.memory_mib);
    if (d < best_d || (d == best_d && engines_differ(*best) && !engines_differ(p))) best = &p;
  }
  return best;
}

// go-nvlib's rule: the share of `total_mib`, rounded up to eighths, of the
// total in whole GiB, rounded up.
uint64_t MemoryGb(uint64_t mig_mib, uint64_t total_mib) {
  const double eighths =
      std::ceil(8.0 * static_cast<double>(mig_mib) / static_cast<double>(total_mib));
  const auto total_gib = static_cast<double>((total_mib + 1023) / 1024);
  return static_cast<uint64_t>(std::llround(eighths / 8.0 * total_gib));
}

}  // namespace

std::vector<GpuInstanceProfile> ReadGpuInstanceProfiles(const NvmlLibrary& lib,
                                                        nvmlDevice_t parent) {
  const NvmlFunctions& f = lib.fn();
  std::vector<GpuInstanceProfile> out;
  bool versioned = f.DeviceGetGpuInstanceProfileInfoV != nullptr;
  for (unsigned profile = 0; profile < kProfileProbeLimit; ++profile) {
    if (versioned) {
      nvmlGpuInstanceProfileInfo_v2_t info{};
      info.version = nvmlGpuInstanceProfileInfo_v2;
      const nvmlReturn_t r = f.DeviceGetGpuInstanceProfileInfoV(parent, profile, &info);
      if (r == NVML_SUCCESS) {
        GpuInstanceProfile p = FromInfo(info);
        info.name[sizeof info.name - 1] = '\0';
        p.name = info.name;
        out.push_back(std::move(p));
        continue;
      }
      // A driver that exports the name but not this struct version.
      versioned = r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && r != NVML_ERROR_FUNCTION_NOT_FOUND;
      if (versioned) continue;
    }
    if (f.DeviceGetGpuInstanceProfileInfo == nullptr) break;
    nvmlGpuInstanceProfileInfo_t info{};
    if (f.DeviceGetGpuInstanceProfileInfo(parent, profile, &info) == NVML_SUCCESS) {
      out.push_back(FromInfo(info));
    }
  }
  return out;
}

std::string MigProfileName(const GpuRecord& parent, const MigRecord& mig) {
  if (mig.gpu_instance_slices == 0 || mig.memory_mib == 0) return "";
  std::string base;
  if (const GpuInstanceProfile* p = MatchProfile(parent.mig_profiles, mig)) {
    base = NameFromNvml(p->name, mig.gpu_instance_slices);
  }
  if (base.empty()) {
    uint64_t total = parent.memory_mib;
    for (const GpuInstanceProfile& p : parent.mig_profiles) {
      if (parent.memory_mib == 0 && p.memory_mib > total) total = p.memory_mib;
    }
    if (total == 0) return "";
    const uint64_t gb = MemoryGb(mig.memory_mib, total);
    if (gb == 0) return "";
    base = StrCat(mig.gpu_instance_slices, "g.", gb, "gb");
  }
  if (mig.compute_instance_slices != 0 && mig.compute_instance_slices < mig.gpu_instance_slices) {
    return StrCat(mig.compute_instance_slices, "c.", base);
  }
  return base;
}

}  // namespace gpu_agent::nvml
