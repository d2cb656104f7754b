#include "agent/labels/gpu_labels.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "base/resource_name.h"
#include "base/strings.h"
#include "nvml/mig_profile.h"

namespace gpu_agent {
namespace {

constexpr size_t kMaxLabelValue = 63;
constexpr std::string_view kGpuPrefix = "nvidia.com/gpu";

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

uint32_t Fnv1a(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

// ^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$, at most 63 characters.
bool ValidLabelValue(std::string_view v) {
  if (v.size() > kMaxLabelValue) return false;
  if (v.empty()) return true;
  if (!IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// "nvidia.com/<name>": the name part as a label key's (at most 63, the same
// characters as a value, alphanumeric at both ends, not empty).
bool ValidLabelKey(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view name = key.substr(slash + 1);
  return !name.empty() && ValidLabelValue(name);
}

// GFD's family names, from the compute capability.
std::string Family(int major, int minor) {
  switch (major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return minor < 5 ? "volta" : "turing";
    case 8:
      return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    default:
      return "undefined";
  }
}

ResourceSharing SharingOf(const SharingByResource& sharing, const std::string& resource) {
  const auto it = sharing.find(resource);
  return it == sharing.end() ? ResourceSharing{} : it->second;
}

// product, count, replicas and sharing-strategy under `prefix`.
void AddBase(NodeLabels* l, std::string_view prefix, std::string product, int64_t count,
             const ResourceSharing& sharing, bool sharing_applies) {
  const int replicas = sharing_applies ? sharing.replicas : 0;
  if (sharing_applies && replicas > 1 && !sharing.renamed) product += "-SHARED";
  (*l)[StrCat(prefix, ".product")] = LabelValue(product);
  (*l)[StrCat(prefix, ".count")] = StrCat(count);
  (*l)[StrCat(prefix, ".replicas")] = StrCat(replicas);
  (*l)[StrCat(prefix, ".sharing-strategy")] = replicas > 1 ? "time-slicing" : "none";
}

// What a MIG device offers, as GFD's attribute labels.
void AddMigAttributes(NodeLabels* l, std::string_view prefix, const nvml::MigRecord& m) {
  (*l)[StrCat(prefix, ".memory")] = StrCat(m.memory_mib);
  (*l)[StrCat(prefix, ".multiprocessors")] = StrCat(m.multiprocessors);
  (*l)[StrCat(prefix, ".slices.gi")] = StrCat(m.gpu_instance_slices);
  (*l)[StrCat(prefix, ".slices.ci")] = StrCat(m.compute_instance_slices);
  (*l)[StrCat(prefix, ".engines.copy")] = StrCat(m.copy_engines);
  (*l)[StrCat(prefix, ".engines.decoder")] = StrCat(m.decoders);
  (*l)[StrCat(prefix, ".engines.encoder")] = StrCat(m.encoders);
  (*l)[StrCat(prefix, ".engines.jpeg")] = StrCat(m.jpegs);
  (*l)[StrCat(prefix, ".engines.ofa")] = StrCat(m.ofas);
}

void AddVersions(const nvml::Inventory& inv, LabelResult* out) {
  NodeLabels& l = out->labels;
  const std::vector<std::string_view> d = StrSplit(inv.driver_version, '.');
  if (d.size() == 2 || d.size() == 3) {
    const std::string rev = d.size() == 3 ? std::string(d[2]) : "";
    l["nvidia.com/cuda.driver.major"] = LabelValue(d[0]);
    l["nvidia.com/cuda.driver.minor"] = LabelValue(d[1]);
    l["nvidia.com/cuda.driver.rev"] = LabelValue(rev);
    l["nvidia.com/cuda.driver-version.major"] = LabelValue(d[0]);
    l["nvidia.com/cuda.driver-version.minor"] = LabelValue(d[1]);
    l["nvidia.com/cuda.driver-version.revision"] = LabelValue(rev);
    l["nvidia.com/cuda.driver-version.full"] = LabelValue(inv.driver_version);
  } else {
    out->warnings.push_back(StrCat("driver version \"", inv.driver_version,
                                   "\" is not X.Y[.Z]: no cuda.driver labels"));
  }
  const std::vector<std::string_view> cuda = StrSplit(inv.cuda_driver_version, '.');
  if (cuda.size() == 2) {
    l["nvidia.com/cuda.runtime.major"] = LabelValue(cuda[0]);
    l["nvidia.com/cuda.runtime.minor"] = LabelValue(cuda[1]);
    l["nvidia.com/cuda.runtime-version.major"] = LabelValue(cuda[0]);
    l["nvidia.com/cuda.runtime-version.minor"] = LabelValue(cuda[1]);
    l["nvidia.com/cuda.runtime-version.full"] = LabelValue(inv.cuda_driver_version);
  } else {
    out->warnings.push_back(StrCat("CUDA driver version \"", inv.cuda_driver_version,
                                   "\" is not X.Y: no cuda.runtime labels"));
  }
}

// The whole-GPU labels. GPUs are grouped by model; with several models the
// labels describe one, chosen deterministically: a model with GPUs out of
// MIG mode first (time-slicing applies to those), then the most GPUs, then
// the lowest index.
void AddWholeGpus(const Config& c, const SharingByResource& sharing,
                  const std::vector<const nvml::GpuRecord*>& gpus, LabelResult* out) {
  struct Group {
    const nvml::GpuRecord* first = nullptr;
    int64_t count = 0;
    bool whole = false;  // some GPU of the model is out of MIG mode
  };
  std::map<std::string, Group> groups;
  for (const nvml::GpuRecord* g : gpus) {
    Group& grp = groups[g->name];
    if (grp.first == nullptr) grp.first = g;
    ++grp.count;
    grp.whole |= !g->mig_enabled;
  }
  const Group* best = nullptr;
  for (const auto& [name, g] : groups) {
    if (best == nullptr ||
        std::make_tuple(g.whole, g.count, -static_cast<int64_t>(g.first->index)) >
            std::make_tuple(best->whole, best->count, -static_cast<int64_t>(best->first->index))) {
      best = &g;
    }
  }
  if (groups.size() > 1) {
    std::vector<std::string> names;
    for (const auto& [name, g] : groups) names.push_back(StrCat("\"", name, "\" x", g.count));
    out->warnings.push_back(StrCat("several GPU models on this node (", StrJoin(names, ", "),
                                   "): the nvidia.com/gpu.* labels describe \"", best->first->name,
                                   "\""));
  }
  const nvml::GpuRecord& g = *best->first;
  NodeLabels& l = out->labels;
  AddBase(&l, kGpuPrefix, g.name, best->count, SharingOf(sharing, c.resource_name), best->whole);
  if (g.memory_mib != 0) l["nvidia.com/gpu.memory"] = StrCat(g.memory_mib);
  if (g.cc_major != 0) {
    l["nvidia.com/gpu.family"] = Family(g.cc_major, g.cc_minor);
    l["nvidia.com/gpu.compute.major"] = StrCat(g.cc_major);
    l["nvidia.com/gpu.compute.minor"] = StrCat(g.cc_minor);
  }
}

struct Profile {
  const nvml::GpuRecord* parent = nullptr;
  const nvml::MigRecord* first = nullptr;
  int64_t count = 0;
};

std::map<std::string, Profile> MigProfiles(const std::vector<const nvml::GpuRecord*>& gpus,
                                           LabelResult* out) {
  std::map<std::string, Profile> profiles;
  for (const nvml::GpuRecord* g : gpus) {
    if (!g->mig_enabled) continue;
    for (const nvml::MigRecord& m : g->mig_devices) {
      const std::string name = nvml::MigProfileName(*g, m);
      if (name.empty()) {
        out->warnings.push_back(StrCat("MIG device ", m.uuid, " on GPU ", g->index,
                                       " has no profile name: not labelled"));
        continue;
      }
      Profile& p = profiles[name];
      if (p.first == nullptr) p = {g, &m, 0};
      ++p.count;
    }
  }
  return profiles;
}

void AddMigSingle(const Config& c, const SharingByResource& sharing,
                  const std::vector<const nvml::GpuRecord*>& gpus, LabelResult* out) {
  const nvml::GpuRecord* first_mig = nullptr;
  std::string invalid;
  for (const nvml::GpuRecord* g : gpus) {
    if (g->mig_enabled && first_mig == nullptr) first_mig = g;
    if (g->mig_enabled && g->mig_devices.empty())
      invalid = StrCat("GPU ", g->index, " is in MIG mode with no MIG device");
  }
  if (first_mig == nullptr) return;  // no GPU in MIG mode: as strategy none
  for (const nvml::GpuRecord* g : gpus) {
    if (!g->mig_enabled && invalid.empty())
      invalid = StrCat("GPU ", g->index, " is not in MIG mode while others are");
  }
  const std::map<std::string, Profile> profiles = MigProfiles(gpus, out);
  if (invalid.empty() && profiles.size() != 1) {
    invalid = StrCat(profiles.size(), " MIG profiles on the node (single needs exactly one)");
  }
  NodeLabels& l = out->labels;
  if (!invalid.empty()) {
    out->warnings.push_back(StrCat("migStrategy single does not fit this node: ", invalid,
                                   "; labelling it MIG-INVALID"));
    l["nvidia.com/gpu.product"] = LabelValue(StrCat(first_mig->name, "-MIG-INVALID"));
    l["nvidia.com/gpu.count"] = "0";
    l["nvidia.com/gpu.replicas"] = "0";
    l["nvidia.com/gpu.memory"] = "0";
    return;
  }
  const auto& [name, p] = *profiles.begin();
  AddBase(&l, kGpuPrefix, StrCat(p.parent->name, "-MIG-", name), p.count,
          SharingOf(sharing, c.resource_name), true);
  AddMigAttributes(&l, kGpuPrefix, *p.first);
}

void AddMigMixed(const SharingByResource& sharing, const std::vector<const nvml::GpuRecord*>& gpus,
                 LabelResult* out) {
  for (const auto& [name, p] : MigProfiles(gpus, out)) {
    const std::string resource = StrCat(kMigResourcePrefix, name);
    AddBase(&out->labels, resource, StrCat(p.parent->name, "-MIG-", name), p.count,
            SharingOf(sharing, resource), true);
    AddMigAttributes(&out->labels, resource, *p.first);
  }
}

// gpu-feature-discovery's machine-type labeler: the DMI product name with
// blanks as '-', "unknown" when sysfs has none.
void AddMachine(const nvml::Inventory& inv, LabelResult* out) {
  std::string value = LabelValue(inv.machine_product);
  if (value.empty()) value = "unknown";
  out->labels["nvidia.com/gpu.machine"] = value;
}

// GFD's GPU-mode labeler: from the GPUs' PCI class, the same for all of them
// or "unknown". A VGA controller drives displays (graphics); a 3D
// controller has no display engine enabled (compute).
void AddMode(const std::vector<const nvml::GpuRecord*>& gpus, LabelResult* out) {
  constexpr uint32_t kVgaController = 0x030000;
  constexpr uint32_t k3dController = 0x030200;
  const uint32_t first = gpus.front()->pci_class;
  std::string mode = "unknown";
  const bool same = std::all_of(gpus.begin(), gpus.end(), [first](const nvml::GpuRecord* g) {
    return g->pci_class == first;
  });
  if (same && first == kVgaController) mode = "graphics";
  if (same && first == k3dController) mode = "compute";
  out->labels["nvidia.com/gpu.mode"] = mode;
}

// GFD's clique labeler: "<cluster UUID>.<clique id>" when the GPUs that
// completed fabric registration all share one cluster and one clique; no
// label on a node without fabric, or with GPUs that disagree.
void AddClique(const std::vector<const nvml::GpuRecord*>& gpus, LabelResult* out) {
  std::set<std::string> clusters;
  std::set<unsigned> cliques;
  for (const nvml::GpuRecord* g : gpus) {
    if (!g->fabric.error.empty()) {
      out->warnings.push_back(StrCat("GPU ", g->index, "'s fabric info is unreadable (",
                                     g->fabric.error, "): no nvidia.com/gpu.clique label"));
      return;
    }
    if (!g->fabric.attached) continue;
    clusters.insert(g->fabric.cluster_uuid);
    cliques.insert(g->fabric.clique_id);
  }
  if (clusters.empty()) return;
  if (clusters.size() > 1 || cliques.size() > 1) {
    out->warnings.push_back(StrCat("the GPUs are in ", clusters.size(), " fabric cluster(s) and ",
                                   cliques.size(),
                                   " clique(s), not one: no nvidia.com/gpu.clique label"));
    return;
  }
  out->labels["nvidia.com/gpu.clique"] = StrCat(*clusters.begin(), ".", *cliques.begin());
}

}  // namespace

std::string LabelValue(std::string_view text) {
  std::string kept;
  bool blank = false;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n') {
      blank = !kept.empty();
      continue;
    }
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') continue;
    if (blank) kept.push_back('-');
    blank = false;
    kept.push_back(c);
  }
  size_t b = 0, e = kept.size();
  while (b < e && !IsAlnum(kept[b])) ++b;
  while (e > b && !IsAlnum(kept[e - 1])) --e;
  std::string v = kept.substr(b, e - b);
  if (v.size() <= kMaxLabelValue) return v;
  char hash[16];
  std::snprintf(hash, sizeof hash, "%08x", Fnv1a(v));
  std::string head = v.substr(0, kMaxLabelValue - 9);
  while (!head.empty() && !IsAlnum(head.back())) head.pop_back();
  return StrCat(head, "-", hash);
}

LabelResult ComputeNodeLabels(const Config& c, const nvml::Inventory& inv,
                              const std::vector<size_t>& positions,
                              const SharingByResource& sharing) {
  std::vector<const nvml::GpuRecord*> gpus;
  for (size_t i : positions) gpus.push_back(&inv.gpus[i]);
  LabelResult out;
  if (gpus.empty()) return out;
  out.labels["nvidia.com/gpu.present"] = "true";
  AddVersions(inv, &out);
  bool capable = false;
  for (const nvml::GpuRecord* g : gpus) capable |= g->mig_capable;
  out.labels["nvidia.com/mig.capable"] = capable ? "true" : "false";
  AddMachine(inv, &out);
  AddMode(gpus, &out);
  AddClique(gpus, &out);
  AddWholeGpus(c, sharing, gpus, &out);
  const MigStrategy strategy = c.flags.mig();
  if (strategy == MigStrategy::kSingle) AddMigSingle(c, sharing, gpus, &out);
  if (strategy == MigStrategy::kMixed) AddMigMixed(sharing, gpus, &out);
  if (strategy != MigStrategy::kNone) out.labels["nvidia.com/mig.strategy"] = c.flags.mig_strategy;
  for (auto it = out.labels.begin(); it != out.labels.end();) {
    if (ValidLabelKey(it->first) && ValidLabelValue(it->second)) {
      ++it;
      continue;
    }
    out.warnings.push_back(
        StrCat("label ", it->first, "=", it->second, " is not a valid Kubernetes label: left out"));
    it = out.labels.erase(it);
  }
  return out;
}

std::string LabelsAsLines(const NodeLabels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) StrAppend(&out, k, "=", v, "\n");
  return out;
}

std::string LabelsAsJson(const NodeLabels& labels) {
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.SetIndent(' ', 2);
  w.StartObject();
  for (const auto& [k, v] : labels) {
    w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
    w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  }
  w.EndObject();
  return StrCat(std::string_view(buf.GetString(), buf.GetSize()), "\n");
}

std::string LabelsAsYaml(const NodeLabels& labels) {
  if (labels.empty()) return "{}\n";
  YAML::Emitter e;
  e << YAML::BeginMap;
  // Quoted: "true" and "8" are strings in a label map, not a bool and a number.
  for (const auto& [k, v] : labels) e << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  e << YAML::EndMap;
  return StrCat(e.c_str(), "\n");
}

}  // namespace gpu_agent
