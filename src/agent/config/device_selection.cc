#include "agent/config/device_selection.h"

#include <fnmatch.h>

#include <cctype>
#include <cstdlib>
#include <set>

#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

constexpr const char* kForms =
    "write uuid:GPU-..., index:N, pci:0xDDDD (PCI device id) or name:PATTERN (e.g. name:*A100*)";

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string Describe(const nvml::GpuRecord& g) {
  return StrCat("GPU ", g.index, " (", g.uuid.empty() ? "no UUID" : g.uuid, ")");
}

}  // namespace

bool GpuSelector::Matches(const nvml::GpuRecord& gpu) const {
  switch (kind) {
    case Kind::kUuid:
      return AsciiToLower(gpu.uuid) == AsciiToLower(value);
    case Kind::kIndex:
      return gpu.index == index;
    case Kind::kPciDeviceId:
      return pci_id > 0xFFFF ? gpu.pci_device_id == pci_id : (gpu.pci_device_id >> 16) == pci_id;
    case Kind::kName:
      return fnmatch(value.c_str(), gpu.name.c_str(), FNM_CASEFOLD) == 0;
  }
  return false;
}

absl::StatusOr<GpuSelector> ParseGpuSelector(std::string_view text, std::string where) {
  GpuSelector sel;
  sel.text = std::string(text);
  sel.where = std::move(where);
  const std::string_view trimmed = StripWhitespace(text);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(StrCat(sel.where, " \"", sel.text, "\": ", why));
  };
  std::string_view kind, value;
  const size_t colon = trimmed.find(':');
  if (colon == std::string_view::npos) {
    if (AllDigits(trimmed)) {
      kind = "index";
    } else if (trimmed.size() > 4 && AsciiToLower(trimmed.substr(0, 4)) == "gpu-") {
      kind = "uuid";
    } else if (trimmed.size() > 2 && AsciiToLower(trimmed.substr(0, 2)) == "0x") {
      kind = "pci";
    } else {
      return bad(StrCat("not a selector; ", kForms));
    }
    value = trimmed;
  } else {
    kind = trimmed.substr(0, colon);
    value = StripWhitespace(trimmed.substr(colon + 1));
  }
  if (value.empty()) return bad(StrCat("nothing after \"", kind, ":\""));
  const std::string k = AsciiToLower(kind);
  if (k == "uuid") {
    if (AsciiToLower(value.substr(0, 4)) == "mig-") {
      return bad("selects GPUs, not MIG devices; give the parent GPU's UUID");
    }
    sel.kind = GpuSelector::Kind::kUuid;
    sel.value = std::string(value);
  } else if (k == "index") {
    int n = 0;
    if (!AllDigits(value) || !ParseInt(value, &n)) return bad("an index is a whole number");
    sel.kind = GpuSelector::Kind::kIndex;
    sel.index = static_cast<unsigned>(n);
  } else if (k == "pci") {
    std::string v(value);
    char* end = nullptr;
    const unsigned long long id = std::strtoull(v.c_str(), &end, 16);
    if (v.size() < 3 || AsciiToLower(v.substr(0, 2)) != "0x" || *end != '\0' || id == 0 ||
        id > 0xFFFFFFFFull) {
      return bad("a PCI device id is hex: 0x20b2, or 0x20b210de with the vendor");
    }
    sel.kind = GpuSelector::Kind::kPciDeviceId;
    sel.pci_id = static_cast<uint32_t>(id);
  } else if (k == "name") {
    sel.kind = GpuSelector::Kind::kName;
    sel.value = std::string(value);
  } else {
    std::string msg = StrCat("unknown selector kind \"", kind, "\"");
    if (std::string near = ClosestMatch(k, {"uuid", "index", "pci", "name"}); !near.empty()) {
      StrAppend(&msg, " (did you mean \"", near, ":\"?)");
    }
    return bad(StrCat(msg, "; ", kForms));
  }
  return sel;
}

namespace {

absl::StatusOr<std::vector<GpuSelector>> ParseAll(const std::vector<std::string>& list,
                                                  const char* key) {
  std::vector<GpuSelector> out;
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<GpuSelector> s = ParseGpuSelector(list[i], StrCat(key, "[", i, "]"));
    if (!s.ok()) return s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

struct ParsedSelection {
  std::vector<GpuSelector> include, exclude;
};

// Parses and checks every selector of `selection` and the cap, once.
absl::StatusOr<ParsedSelection> Parse(const Config::DeviceSelection& selection) {
  absl::StatusOr<std::vector<GpuSelector>> inc = ParseAll(selection.include, "devices.include");
  if (!inc.ok()) return inc.status();
  absl::StatusOr<std::vector<GpuSelector>> exc = ParseAll(selection.exclude, "devices.exclude");
  if (!exc.ok()) return exc.status();
  for (const GpuSelector& i : *inc) {
    for (const GpuSelector& e : *exc) {
      if (i.kind == e.kind &&
          AsciiToLower(StripWhitespace(i.text)) == AsciiToLower(StripWhitespace(e.text))) {
        return absl::InvalidArgumentError(StrCat("\"", i.text, "\" is both in ", i.where,
                                                 " and in ", e.where, "; keep it in one"));
      }
    }
  }
  if (selection.max < 0) {
    return absl::InvalidArgumentError(
        StrCat("devices.max: ", selection.max, " is negative (0 means no cap)"));
  }
  return ParsedSelection{*std::move(inc), *std::move(exc)};
}

}  // namespace

absl::Status ValidateDeviceSelection(const Config::DeviceSelection& selection) {
  return Parse(selection).status();
}

absl::StatusOr<GpuChoice> ChooseGpus(const Config::DeviceSelection& selection,
                                     const std::vector<nvml::GpuRecord>& gpus) {
  absl::StatusOr<ParsedSelection> parsed = Parse(selection);
  if (!parsed.ok()) return parsed.status();
  const std::vector<GpuSelector>& inc = parsed->include;
  const std::vector<GpuSelector>& exc = parsed->exclude;
  GpuChoice out;
  auto note_unmatched = [&](const std::vector<GpuSelector>& list) {
    for (const GpuSelector& s : list) {
      bool any = false;
      for (const nvml::GpuRecord& g : gpus) any |= s.Matches(g);
      if (!any) out.warnings.push_back(StrCat(s.where, " \"", s.text, "\" matches no GPU"));
    }
  };
  note_unmatched(inc);
  note_unmatched(exc);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const nvml::GpuRecord& g = gpus[i];
    const GpuSelector* included = nullptr;
    for (const GpuSelector& s : inc) {
      if (s.Matches(g) && (!included || s.Exact())) included = &s;
    }
    if (!inc.empty() && !included) continue;
    const GpuSelector* excluded = nullptr;
    for (const GpuSelector& s : exc) {
      if (s.Matches(g)) excluded = &s;
    }
    if (excluded) {
      if (included && included->Exact()) {
        return absl::InvalidArgumentError(StrCat(Describe(g), " is named by ", included->where,
                                                 " \"", included->text, "\" and excluded by ",
                                                 excluded->where, " \"", excluded->text,
                                                 "\"; the two overlap, remove one"));
      }
      continue;
    }
    out.chosen.push_back(i);
  }
  if (selection.max > 0 && out.chosen.size() > static_cast<size_t>(selection.max)) {
    std::vector<std::string> cut;
    for (size_t k = static_cast<size_t>(selection.max); k < out.chosen.size(); ++k) {
      cut.push_back(StrCat(gpus[out.chosen[k]].index));
    }
    out.warnings.push_back(
        StrCat("devices.max ", selection.max, " leaves out GPU(s) ", StrJoin(cut, ", ")));
    out.chosen.resize(static_cast<size_t>(selection.max));
  }
  return out;
}

}  // namespace gpu_agent
