#include "dra/dra_device.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <iterator>

#include "base/strings.h"

namespace gpu_agent::dra {
namespace {

// A profile name as part of a DNS label: "1g.10gb" -> "1g-10gb".
std::string LabelPart(const std::string& s) {
  std::string out;
  for (char c : AsciiToLower(s)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (ok) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

// At most the 63 characters of a DNS label, ending alphanumeric.
std::string Label(std::string s) {
  if (s.size() > 63) s.resize(63);
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s;
}

// resource.kubernetes.io/pciBusID takes "dddd:bb:dd.f", lowercase.
std::string StandardPciBusId(const std::string& nvml_bus_id) {
  const std::string id = AsciiToLower(nvml::SysfsPciAddress(nvml_bus_id));
  if (id.size() != 12 || id[4] != ':' || id[7] != ':' || id[10] != '.') return "";
  return id;
}

void AddCommon(const nvml::Inventory& inv, const nvml::GpuRecord& gpu, const std::string& pcie_root,
               DraDevice* d) {
  auto& a = d->attributes;
  a["productName"] = AttributeValue::String(gpu.name);
  if (!gpu.brand.empty()) a["brand"] = AttributeValue::String(gpu.brand);
  if (!gpu.architecture.empty()) a["architecture"] = AttributeValue::String(gpu.architecture);
  if (gpu.minor >= 0) a["minor"] = AttributeValue::Int(gpu.minor);
  if (gpu.cc_major > 0) {
    a["cudaComputeCapability"] =
        AttributeValue::Version(StrCat(gpu.cc_major, ".", gpu.cc_minor, ".0"));
  }
  if (std::string v = SemanticVersion(inv.driver_version); !v.empty()) {
    a["driverVersion"] = AttributeValue::Version(v);
  }
  if (std::string v = SemanticVersion(inv.cuda_driver_version); !v.empty()) {
    a["cudaDriverVersion"] = AttributeValue::Version(v);
  }
  if (!pcie_root.empty()) a["resource.kubernetes.io/pcieRoot"] = AttributeValue::String(pcie_root);
  if (gpu.numa_node >= 0) a["resource.kubernetes.io/numaNode"] = AttributeValue::Int(gpu.numa_node);
}

}  // namespace

std::string GpuDeviceName(const nvml::GpuRecord& gpu) {
  std::string id = StandardPciBusId(gpu.pci_bus_id);
  if (id.empty()) {
    // No bus id NVML would give: the UUID, which never changes either.
    id = AsciiToLower(gpu.uuid);
    if (id.starts_with("gpu-")) id = id.substr(4);
  }
  return Label(StrCat("gpu-", LabelPart(id)));
}

std::string MigDeviceName(const std::string& gpu_name, const std::string& profile,
                          unsigned gpu_instance, unsigned compute_instance) {
  const std::string part = LabelPart(profile);
  return Label(StrCat(gpu_name, "-mig-", part, part.empty() ? "" : "-", gpu_instance, "-",
                      compute_instance));
}

namespace {

// `n` in the largest unit of `suffixes` (each `base` times the one before)
// that keeps an integer: a quantity as the API server writes it back.
template <size_t N>
std::string Canonical(uint64_t n, uint64_t base, const char* const (&suffixes)[N]) {
  size_t s = 0;
  while (n != 0 && n % base == 0 && s + 1 < N) {
    n /= base;
    ++s;
  }
  return StrCat(n, suffixes[s]);
}

}  // namespace

std::string MebibyteQuantity(uint64_t mib) {
  static constexpr const char* kSuffixes[] = {"Mi", "Gi", "Ti", "Pi", "Ei"};
  return mib == 0 ? "0" : Canonical(mib, 1024, kSuffixes);
}

std::string DecimalQuantity(int64_t n) {
  static constexpr const char* kSuffixes[] = {"", "k", "M", "G", "T", "P", "E"};
  return n < 0 ? StrCat(n) : Canonical(static_cast<uint64_t>(n), 1000, kSuffixes);
}

int64_t WholeQuantity(std::string_view q) {
  static constexpr std::pair<char, int64_t> kSuffixes[] = {
      {'k', 1000}, {'M', 1000000}, {'G', 1000000000}};
  int64_t scale = 1;
  for (const auto& [suffix, factor] : kSuffixes) {
    if (!q.empty() && q.back() == suffix) {
      scale = factor;
      q.remove_suffix(1);
      break;
    }
  }
  int64_t n = 0;
  constexpr int64_t kMax = int64_t{1} << 53;
  if (q.empty() || q.size() > 16 || q.find_first_not_of("0123456789") != std::string_view::npos ||
      !ParseInt(q, &n) || n > kMax / scale) {
    return -1;
  }
  return n * scale;
}

std::string SemanticVersion(const std::string& v) {
  std::vector<std::string_view> parts = StrSplit(v, '.');
  if (v.empty() || parts.size() > 3) return "";
  std::vector<std::string> out;
  for (std::string_view p : parts) {
    long n = 0;
    if (p.empty() || !ParseInt(p, &n) || n < 0) return "";
    out.push_back(StrCat(n));
  }
  while (out.size() < 3) out.push_back("0");
  return StrJoin(out, ".");
}

std::string ReadPcieRoot(const std::string& sysfs_root, const std::string& nvml_bus_id) {
  const std::string link =
      StrCat(sysfs_root, "/bus/pci/devices/", nvml::SysfsPciAddress(nvml_bus_id));
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  // ".../devices/pci0000:00/0000:00:01.0/0000:07:00.0": the first part
  // that starts "pci" is the root complex.
  for (std::string_view part : StrSplit(std::string_view(buf, static_cast<size_t>(n)), '/')) {
    if (part.starts_with("pci") && part.size() > 3) return std::string(part);
  }
  return "";
}

DraDevice BuildDevice(const nvml::Inventory& inventory, const nvml::GpuRecord& gpu,
                      const nvml::MigRecord* mig, std::string name, const std::string& profile,
                      const std::string& pcie_root, int shares, int most_per_claim) {
  DraDevice d;
  d.name = std::move(name);
  AddCommon(inventory, gpu, pcie_root, &d);
  if (shares > 1) {
    d.sharing.shares = shares;
    d.sharing.most_per_claim = std::clamp(most_per_claim, 1, shares);
  }
  // Each capacity's share: its value over the shares, rounded down.
  auto add_memory = [&d, shares](uint64_t mib) {
    d.capacity["memory"] = MebibyteQuantity(mib);
    if (shares > 1) d.sharing.per_share["memory"] = MebibyteQuantity(mib / shares);
  };
  if (mig) {
    d.key = {gpu.uuid, static_cast<int>(mig->gpu_instance_id),
             static_cast<int>(mig->compute_instance_id)};
    d.uuid = mig->uuid;
    d.attributes["type"] = AttributeValue::String("mig");
    d.attributes["uuid"] = AttributeValue::String(mig->uuid);
    d.attributes["parentUUID"] = AttributeValue::String(gpu.uuid);
    if (!profile.empty()) d.attributes["profile"] = AttributeValue::String(profile);
    add_memory(mig->memory_mib);
    if (mig->multiprocessors > 0) {
      d.capacity["multiprocessors"] = DecimalQuantity(mig->multiprocessors);
      if (shares > 1)
        d.sharing.per_share["multiprocessors"] = StrCat(mig->multiprocessors / shares);
    }
    return d;
  }
  d.key = DeviceKey::Gpu(gpu.uuid);
  d.uuid = gpu.uuid;
  d.attributes["type"] = AttributeValue::String("gpu");
  d.attributes["uuid"] = AttributeValue::String(gpu.uuid);
  if (std::string id = StandardPciBusId(gpu.pci_bus_id); !id.empty()) {
    d.attributes["resource.kubernetes.io/pciBusID"] = AttributeValue::String(id);
  }
  if (gpu.memory_mib > 0) add_memory(gpu.memory_mib);
  return d;
}

}  // namespace gpu_agent::dra
