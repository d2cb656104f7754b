#include "dra/claim_allocation.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <map>

#include "base/json.h"
#include "base/strings.h"
#include "base/text.h"
#include "dra/claim_ref.h"
#include "dra/dra_device.h"

namespace gpu_agent::dra {
namespace {

using json::Member;
using json::Strings;

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
  const std::string kind = json::String(*params, "kind");
  if (kind != "GpuConfig") {
    return absl::InvalidArgumentError(StrCat("opaque config kind \"", kind, "\" is not one ",
                                             driver, " knows (it knows GpuConfig)"));
  }
  if (json::String(*params, "apiVersion") != version) {
    return absl::InvalidArgumentError(StrCat(
        "GpuConfig apiVersion \"", json::String(*params, "apiVersion"), "\" is not ", version));
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
  const std::string strategy = json::String(*sharing, "strategy");
  if (strategy != "TimeSlicing") {
    return absl::InvalidArgumentError(StrCat("GpuConfig sharing.strategy \"", strategy,
                                             "\" is not one this driver knows (TimeSlicing)"));
  }
  const rapidjson::Value* ts = Member(*sharing, "timeSlicing");
  const std::string interval = ts ? json::String(*ts, "interval") : kDefaultTimeSlice;
  if (TimeSliceLevel(interval) >= 0) return interval;
  return absl::InvalidArgumentError(StrCat("GpuConfig sharing.timeSlicing.interval \"", interval,
                                           "\" is not one of Default, Short, Medium, Long"));
}

// The claim's requests by name (spec.devices.requests[].name), each with
// the subrequests of its prioritized list (firstAvailable[].name), empty
// for a request of one kind of device.
class ClaimRequests {
 public:
  void Add(std::string name, std::vector<std::string> subrequests) {
    names_.push_back(name);
    subrequests_[std::move(name)] = std::move(subrequests);
  }
  // Why `ref` ("<request>" or "<request>/<subrequest>") is not one of the
  // claim's, as a phrase ("request \"x\", which the claim does not
  // have ..."); empty when it is.
  std::string Unknown(const std::string& ref) const {
    const std::string main = MainRequestName(ref);
    auto it = subrequests_.find(main);
    if (it == subrequests_.end()) {
      return StrCat(
          "request \"", Printable(main, 63), "\", which the claim does not have (",
          names_.empty() ? std::string("it has none") : StrCat("it has ", StrJoin(names_, ", ")),
          ")");
    }
    if (main.size() == ref.size()) return "";
    const std::string sub = ref.substr(main.size() + 1);
    const std::vector<std::string>& subs = it->second;
    if (std::find(subs.begin(), subs.end(), sub) != subs.end()) return "";
    return StrCat("subrequest \"", Printable(ref, 130), "\", which request \"", main, "\" ",
                  subs.empty()
                      ? std::string("does not have (it has no firstAvailable list)")
                      : StrCat("does not list (firstAvailable: ", StrJoin(subs, ", "), ")"));
  }

 private:
  std::vector<std::string> names_;  // in the claim's order
  std::map<std::string, std::vector<std::string>> subrequests_;
};

// spec.devices.requests of the claim: each request's name and its
// firstAvailable subrequests' (v1, v1beta2 and v1beta1 spell them alike).
absl::StatusOr<ClaimRequests> ReadRequests(const rapidjson::Value& claim) {
  ClaimRequests out;
  const rapidjson::Value* spec = Member(claim, "spec");
  const rapidjson::Value* devices = spec ? Member(*spec, "devices") : nullptr;
  const rapidjson::Value* requests = devices ? Member(*devices, "requests") : nullptr;
  if (requests == nullptr) return out;
  if (!requests->IsArray()) {
    return absl::InvalidArgumentError("spec.devices.requests is not a list");
  }
  for (const auto& r : requests->GetArray()) {
    std::vector<std::string> subs;
    if (const rapidjson::Value* first = Member(r, "firstAvailable"); first && first->IsArray()) {
      for (const auto& sub : first->GetArray()) subs.push_back(json::String(sub, "name"));
    }
    out.Add(json::String(r, "name"), std::move(subs));
  }
  return out;
}

// Whether a config that names `requests` applies to the result of
// `request`: it names none (then all), the result's own, or the main
// request of the result's subrequest.
bool AppliesTo(const std::vector<std::string>& requests, const std::string& request) {
  if (requests.empty()) return true;
  for (const std::string& n : requests) {
    if (n == request || n == MainRequestName(request)) return true;
  }
  return false;
}

// A result's share of a shared device: its shareID (a UID, as the
// scheduler makes them) and the shares it consumes.
absl::Status ReadShare(const rapidjson::Value& result, AllocatedDevice* a) {
  const rapidjson::Value* id = Member(result, "shareID");
  if (id == nullptr) return absl::OkStatus();
  if (!id->IsString()) return absl::InvalidArgumentError("shareID is not a string");
  a->share_id = id->GetString();
  if (absl::Status s = ValidateClaimUid(a->share_id); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("shareID: ", s.message()));
  }
  const rapidjson::Value* consumed = Member(result, "consumedCapacity");
  const rapidjson::Value* shares = consumed ? Member(*consumed, kSharesCapacity) : nullptr;
  if (shares == nullptr) return absl::OkStatus();
  const std::string text = shares->IsString() ? shares->GetString() : "";
  a->shares = WholeQuantity(text);
  if (a->shares < 1 || a->shares > kMaxShares) {
    return absl::InvalidArgumentError(
        StrCat("consumedCapacity.", kSharesCapacity, " \"", Printable(text, 40),
               "\" is not a whole number of shares from 1 to ", kMaxShares));
  }
  return absl::OkStatus();
}

}  // namespace

std::string MainRequestName(const std::string& request) {
  return request.substr(0, request.find('/'));
}

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
  json::Document d;
  if (absl::Status s = json::Parse(claim_json, "the API server's answer", &d); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(NamedClaim(claim), ": ", s.message()));
  }
  if (!d.IsObject()) {
    return absl::InvalidArgumentError(
        StrCat(NamedClaim(claim), ": the API server's answer is not a ResourceClaim"));
  }
  const rapidjson::Value* meta = Member(d, "metadata");
  const std::string uid = meta ? json::String(*meta, "uid") : "";
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
  absl::StatusOr<ClaimRequests> requests = ReadRequests(d);
  if (!requests.ok()) {
    return absl::InvalidArgumentError(StrCat(NamedClaim(claim), ": ", requests.status().message()));
  }
  std::vector<AllocatedDevice> out;
  std::vector<std::string> others;
  if (results != nullptr && results->IsArray()) {
    for (const auto& r : results->GetArray()) {
      const std::string r_driver = json::String(r, "driver"), r_pool = json::String(r, "pool");
      if (r_driver == driver && r_pool == pool) {
        AllocatedDevice a;
        a.request = json::String(r, "request");
        a.device = json::String(r, "device");
        const rapidjson::Value* admin = Member(r, "adminAccess");
        a.admin_access = admin != nullptr && admin->IsBool() && admin->GetBool();
        if (absl::Status s = ReadShare(r, &a); !s.ok()) {
          return absl::InvalidArgumentError(StrCat(NamedClaim(claim), ": its result for device \"",
                                                   Printable(a.device, 128), "\": ", s.message()));
        }
        if (const rapidjson::Value* t = Member(r, "tolerations"); t && t->IsArray()) {
          for (const auto& tol : t->GetArray()) {
            a.tolerations.push_back({json::String(tol, "key"), json::String(tol, "operator"),
                                     json::String(tol, "value"), json::String(tol, "effect")});
          }
        }
        out.push_back(std::move(a));
      } else {
        others.push_back(StrCat(r_driver, "/", r_pool, "/", json::String(r, "device")));
      }
    }
  }
  if (out.empty()) {
    return absl::FailedPreconditionError(StrCat(
        NamedClaim(claim), " has no device of driver ", driver, " in pool ", pool, " allocated",
        others.empty() ? "" : StrCat(" (it has ", StrJoin(others, ", "), ")")));
  }
  // This driver's pools are nodes: a device of another node's pool cannot
  // be given to a container here, and a claim prepared without it would
  // start its containers short of a device.
  for (const std::string& o : others) {
    if (o.starts_with(driver + "/")) {
      return absl::FailedPreconditionError(
          StrCat(NamedClaim(claim), " is allocated ", Printable(o, 300),
                 ", a device of another node's pool (this node's is ", pool, ")"));
    }
  }
  for (const AllocatedDevice& a : out) {
    if (a.device.empty()) {
      return absl::InvalidArgumentError(StrCat(NamedClaim(claim), ": a result of request \"",
                                               Printable(a.request, 130), "\" names no device"));
    }
    if (std::string why = requests->Unknown(a.request); !why.empty()) {
      return absl::InvalidArgumentError(StrCat(NamedClaim(claim),
                                               ": its allocation's result for device \"",
                                               Printable(a.device, 128), "\" names ", why));
    }
  }
  // Opaque parameters for this driver (from the claim or its class): only
  // our own GpuConfig kind, and only values it knows. Each applies to the
  // requests it names (none: all of them), a request's subrequests with it
  // (resource.k8s.io/v1's rule); the class's come first, so a claim's own
  // config overrides its class's, and a later one an earlier.
  const rapidjson::Value* configs = devices ? Member(*devices, "config") : nullptr;
  if (configs != nullptr && configs->IsArray()) {
    for (const bool class_pass : {true, false}) {
      for (const auto& c : configs->GetArray()) {
        const rapidjson::Value* opaque = Member(c, "opaque");
        if (opaque == nullptr || json::String(*opaque, "driver") != driver) continue;
        if ((json::String(c, "source") == "FromClass") != class_pass) continue;
        const std::vector<std::string> named = Strings(Member(c, "requests"));
        for (const std::string& n : named) {
          if (std::string why = requests->Unknown(n); !why.empty()) {
            return absl::InvalidArgumentError(
                StrCat(NamedClaim(claim), ": a config for ", driver, " names ", why));
          }
        }
        absl::StatusOr<std::string> interval =
            ParseGpuConfig(Member(*opaque, "parameters"), driver);
        if (!interval.ok()) {
          return absl::InvalidArgumentError(
              StrCat(NamedClaim(claim), ": ", interval.status().message()));
        }
        if (interval->empty()) continue;
        for (AllocatedDevice& a : out) {
          if (AppliesTo(named, a.request)) a.time_slice = *interval;
        }
      }
    }
  }
  return out;
}

}  // namespace gpu_agent::dra
