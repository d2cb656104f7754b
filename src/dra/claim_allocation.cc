#include "dra/claim_allocation.h"

#include <rapidjson/document.h>

#include <algorithm>

#include "base/json.h"
#include "base/strings.h"
#include "dra/claim_ref.h"

namespace gpu_agent::dra {
namespace {

using json::Member;
using json::Strings;
std::string Str(const rapidjson::Value& v, const char* key) { return json::String(v, key); }

// Opaque parameters for this driver: kind GpuConfig of <driver>/v1alpha1,
// with at most sharing.strategy TimeSlicing and an interval the driver
// knows. The interval asked ("Default" when timeSlicing names none), or ""
// when the config asks no sharing.
absl::StatusOr<std::string> ParseGpuConfig(const rapidjson::Value* params,
                                           const std::string& driver) {
  const std::string version = StrCat(driver, "/v1alpha1");
  if (params == nullptr || !params->IsObject()) {
    return absl::InvalidArgumentError(StrCat("the opaque config for ", driver,
                                             " is not an object (want kind GpuConfig, ",
                                             "apiVersion ", version, ")"));
  }
  const std::string kind = Str(*params, "kind");
  if (kind != "GpuConfig") {
    return absl::InvalidArgumentError(StrCat("opaque config kind \"", kind, "\" is not one ",
                                             driver, " knows (it knows GpuConfig)"));
  }
  if (Str(*params, "apiVersion") != version) {
    return absl::InvalidArgumentError(
        StrCat("GpuConfig apiVersion \"", Str(*params, "apiVersion"), "\" is not ", version));
  }
  for (const auto& m : params->GetObject()) {
    const std::string key = m.name.GetString();
    if (key != "apiVersion" && key != "kind" && key != "sharing") {
      return absl::InvalidArgumentError(
          StrCat("GpuConfig has the unknown field \"", key, "\" (it has sharing)"));
    }
  }
  const rapidjson::Value* sharing = Member(*params, "sharing");
  if (sharing == nullptr) return std::string();
  const std::string strategy = Str(*sharing, "strategy");
  if (strategy != "TimeSlicing") {
    return absl::InvalidArgumentError(StrCat("GpuConfig sharing.strategy \"", strategy,
                                             "\" is not one this driver knows (TimeSlicing)"));
  }
  const rapidjson::Value* ts = Member(*sharing, "timeSlicing");
  const std::string interval = ts ? Str(*ts, "interval") : kDefaultTimeSlice;
  if (TimeSliceLevel(interval) >= 0) return interval;
  return absl::InvalidArgumentError(StrCat("GpuConfig sharing.timeSlicing.interval \"", interval,
                                           "\" is not one of Default, Short, Medium, Long"));
}

}  // namespace

int TimeSliceLevel(std::string_view interval) {
  constexpr std::string_view kIntervals[] = {kDefaultTimeSlice, "Short", "Medium", "Long"};
  for (int level = 0; level < 4; ++level) {
    if (interval == kIntervals[level]) return level;
  }
  return -1;
}

absl::StatusOr<std::vector<AllocatedDevice>> ParseAllocation(const std::string& claim_json,
                                                             const ClaimRef& claim,
                                                             const std::string& driver,
                                                             const std::string& pool) {
  rapidjson::Document d;
  if (absl::Status s = json::Parse(claim_json, "the API server's answer", &d); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(NamedClaim(claim), ": ", s.message()));
  }
  if (!d.IsObject()) {
    return absl::InvalidArgumentError(
        StrCat(NamedClaim(claim), ": the API server's answer is not a ResourceClaim"));
  }
  const rapidjson::Value* meta = Member(d, "metadata");
  const std::string uid = meta ? Str(*meta, "uid") : "";
  if (uid != claim.uid) {
    return absl::FailedPreconditionError(
        StrCat(NamedClaim(claim), ": UID mismatch: the kubelet asked for ", claim.uid,
               ", the API server has ", uid.empty() ? "none" : uid,
               " (deleted and created again since its allocation?)"));
  }
  const rapidjson::Value* status = Member(d, "status");
  const rapidjson::Value* allocation = status ? Member(*status, "allocation") : nullptr;
  const rapidjson::Value* devices = allocation ? Member(*allocation, "devices") : nullptr;
  const rapidjson::Value* results = devices ? Member(*devices, "results") : nullptr;
  if (allocation == nullptr || !allocation->IsObject()) {
    return absl::FailedPreconditionError(
        StrCat(NamedClaim(claim), " has no allocation (status.allocation is empty)"));
  }
  std::vector<AllocatedDevice> out;
  std::vector<std::string> others;
  if (results != nullptr && results->IsArray()) {
    for (const auto& r : results->GetArray()) {
      const std::string r_driver = Str(r, "driver"), r_pool = Str(r, "pool");
      if (r_driver == driver && r_pool == pool) {
        out.push_back({Str(r, "request"), Str(r, "device"), ""});
      } else {
        others.push_back(StrCat(r_driver, "/", r_pool, "/", Str(r, "device")));
      }
    }
  }
  if (out.empty()) {
    return absl::FailedPreconditionError(StrCat(
        NamedClaim(claim), " has no device of driver ", driver, " in pool ", pool, " allocated",
        others.empty() ? "" : StrCat(" (it has ", StrJoin(others, ", "), ")")));
  }
  for (const AllocatedDevice& a : out) {
    if (a.device.empty()) {
      return absl::InvalidArgumentError(
          StrCat(NamedClaim(claim), ": a result of request \"", a.request, "\" names no device"));
    }
  }
  // Opaque parameters for this driver (from the claim or its class): only
  // our own GpuConfig kind, and only values it knows. Each applies to the
  // requests it names (none: all of them); the class's come first, so a
  // claim's own config overrides its class's, and a later one an earlier.
  const rapidjson::Value* configs = devices ? Member(*devices, "config") : nullptr;
  if (configs != nullptr && configs->IsArray()) {
    for (const bool class_pass : {true, false}) {
      for (const auto& c : configs->GetArray()) {
        const rapidjson::Value* opaque = Member(c, "opaque");
        if (opaque == nullptr || Str(*opaque, "driver") != driver) continue;
        if ((Str(c, "source") == "FromClass") != class_pass) continue;
        absl::StatusOr<std::string> interval =
            ParseGpuConfig(Member(*opaque, "parameters"), driver);
        if (!interval.ok()) {
          return absl::InvalidArgumentError(
              StrCat(NamedClaim(claim), ": ", interval.status().message()));
        }
        if (interval->empty()) continue;
        const std::vector<std::string> requests = Strings(Member(c, "requests"));
        for (AllocatedDevice& a : out) {
          const bool named = requests.empty() || std::find(requests.begin(), requests.end(),
                                                           a.request) != requests.end();
          if (named) a.time_slice = *interval;
        }
      }
    }
  }
  return out;
}

}  // namespace gpu_agent::dra
