#include "dra/feature_probe.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <functional>

#include "apiserver/status.h"
#include "base/duration.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/text.h"
#include "dra/dra_device.h"
#include "dra/resource_slice.h"
#include "dra/slice_refusal.h"

namespace gpu_agent::dra {

using json::Member;

namespace {

constexpr char kTaintedDevice[] = "probe";
constexpr char kSharedDevice[] = "probe-shared";

// The dry-run ResourceSlice, in `api_version`'s shape (a device's fields
// under "basic" in v1beta1): the device "probe" with a NoSchedule taint and
// (`with_none`) a None one, when taints are asked about; the device
// "probe-shared", allowing multiple allocations with a consumable capacity,
// when sharing is. generateName: the server cuts the prefix so that the
// name it makes is valid however long the node's name (up to 253
// characters); a dry run makes one too, and stores nothing.
std::string ProbeSlice(const FeatureProbeOptions& o, const std::string& api_version, bool with_none,
                       bool with_shared) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  auto field = [&w](const char* key, std::string_view value) { json::WriteField(w, key, value); };
  auto taint = [&](const std::string& key, const char* effect) {
    w.StartObject();
    field("key", key);
    field("effect", effect);
    w.EndObject();
  };
  const bool basic = api_version == "v1beta1";
  // A device named `name` whose fields `fields` writes.
  auto device = [&](const char* name, const std::function<void()>& fields) {
    w.StartObject();
    field("name", name);
    if (basic) {
      w.Key("basic");
      w.StartObject();
    }
    fields();
    if (basic) w.EndObject();
    w.EndObject();
  };
  w.StartObject();
  field("apiVersion", StrCat("resource.k8s.io/", api_version));
  field("kind", "ResourceSlice");
  w.Key("metadata");
  w.StartObject();
  field("generateName", StrCat(o.node, "-probe-"));
  w.EndObject();
  w.Key("spec");
  w.StartObject();
  field("driver", o.driver);
  field("nodeName", o.node);
  w.Key("pool");
  w.StartObject();
  field("name", o.node);
  w.Key("generation");
  w.Int(1);
  w.Key("resourceSliceCount");
  w.Int(1);
  w.EndObject();
  w.Key("devices");
  w.StartArray();
  if (o.taints) {
    device(kTaintedDevice, [&] {
      w.Key("taints");
      w.StartArray();
      taint(StrCat(o.driver, "/probe"), "NoSchedule");
      if (with_none) taint(StrCat(o.driver, "/probe-none"), "None");
      w.EndArray();
    });
  }
  if (with_shared) {
    device(kSharedDevice, [&] {
      w.Key("capacity");
      w.StartObject();
      w.Key(kSharesCapacity);
      WriteSharesCapacity(w, 2, 2);  // as a device time-sliced 2 ways publishes it
      w.EndObject();
      w.Key("allowMultipleAllocations");
      w.Bool(true);
    });
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return json::TextOf(buf);
}

// The device named `name` of the answer's spec.devices (its "basic" under
// v1beta1); null when there is none.
const rapidjson::Value* ProbeDevice(const rapidjson::Value* devices, const char* name, bool basic) {
  if (devices == nullptr || !devices->IsArray()) return nullptr;
  for (const auto& d : devices->GetArray()) {
    if (json::String(d, "name") != name) continue;
    const rapidjson::Value* fields = basic ? Member(d, "basic") : &d;
    return fields && fields->IsObject() ? fields : nullptr;
  }
  return nullptr;
}

}  // namespace

FeatureProbe::FeatureProbe(FeatureProbeOptions options, apiserver::RestClient* rest)
    : options_(std::move(options)),
      rest_(rest),
      with_none_(options_.taints),
      with_shared_(options_.sharing),
      backoff_(Backoff::Doubling(options_.backoff_initial, options_.watch_timeout)) {}

void FeatureProbe::Skip() {
  answered_ = true;
  kept_ = false;
  shared_ = false;
}

bool FeatureProbe::Refused(const apiserver::HttpResponse& r, const std::string& api_version) {
  const std::string answer = apiserver::StatusMessage(r);
  // Which field validation names ("spec.devices[0].taints[1].effect"),
  // not just a word the node's name might hold.
  if (with_none_ && (!with_shared_ || answer.find(".taints[") != std::string::npos)) {
    // Refused with a None taint: a server that keeps taints but knows no
    // None effect (before 1.36). Asked again at once without it.
    with_none_ = false;
    LogInfo(
        "ResourceSlices: the API server refuses the None taint effect; degraded devices are "
        "published without a taint",
        {{"node", options_.node}, {"answer", answer}});
    return Ask(api_version);
  }
  if (with_shared_) {
    // A server that does not know the fields drops them and answers 201:
    // this is its validation (or an admission policy) refusing a shared
    // device, and the real slices would be refused the same way.
    with_shared_ = false;
    LogWarning(
        "ResourceSlices: the API server refuses a slice with a shared device; time-sliced devices "
        "are published whole, one claim each",
        {{"node", options_.node}, {"error", answer}});
    if (options_.taints) return Ask(api_version);
    answered_ = true;
    return true;
  }
  // The same for a tainted device: a clear "taints cannot be used".
  answered_ = true;
  kept_ = false;
  LogWarning(
      "ResourceSlices: the API server refuses a slice with a device taint; an unhealthy device "
      "leaves the slices",
      {{"node", options_.node}, {"error", answer}});
  return true;
}

void FeatureProbe::Answered(const rapidjson::Value* tainted, const rapidjson::Value* shared) {
  answered_ = true;
  if (options_.taints) {
    const rapidjson::Value* kept = Member(*tainted, "taints");
    kept_ = kept && kept->IsArray() && kept->Size() >= 1;
    none_ = kept_ && with_none_ && kept->Size() == 2;
    LogInfo(!kept_ ? "ResourceSlices: the API server drops device taints (feature gate "
                     "DRADeviceTaints off); an unhealthy device leaves the slices"
            : none_
                ? "ResourceSlices: the API server keeps device taints, the None effect too; an "
                  "unhealthy or degraded device stays in the slices with its taint"
                : "ResourceSlices: the API server keeps device taints; an unhealthy device stays "
                  "in the slices with its taint",
            {{"node", options_.node}});
  }
  if (with_shared_) {
    const rapidjson::Value* multiple = Member(*shared, "allowMultipleAllocations");
    const rapidjson::Value* capacity = Member(*shared, "capacity");
    const rapidjson::Value* shares = capacity ? Member(*capacity, kSharesCapacity) : nullptr;
    shared_ = multiple && multiple->IsBool() && multiple->GetBool() && shares &&
              Member(*shares, "requestPolicy") != nullptr;
    LogInfo(shared_ ? "ResourceSlices: the API server keeps consumable capacity; a time-sliced "
                      "device is published once, shared by its claims"
                    : "ResourceSlices: the API server drops consumable capacity (feature gate "
                      "DRAConsumableCapacity off); time-sliced devices are published whole, one "
                      "claim each",
            {{"node", options_.node}});
  }
}

bool FeatureProbe::Ask(const std::string& api_version) {
  const bool basic = api_version == "v1beta1";
  const std::string body = ProbeSlice(options_, api_version, with_none_, with_shared_);
  absl::StatusOr<apiserver::HttpResponse> r = rest_->Post(
      StrCat("/apis/resource.k8s.io/", api_version, "/resourceslices?dryRun=All"), body);
  std::string failure;  // why there is no clear answer
  std::string kind;     // its kind: a repeat of the last is not logged again
  int retry_after_s = -1;
  if (!r.ok()) {
    failure = std::string(r.status().message());
    kind = "no answer";
  } else if (r->status == 400 || r->status == 422) {
    return Refused(*r, api_version);
  } else if (r->status < 200 || r->status >= 300) {
    // No answer: a role without `create` on resourceslices (the slices' own
    // creates fail the same way until an operator grants it), a throttle or
    // an unavailable server.
    const std::chrono::steady_clock::duration forbidden_for = forbidden_.Answered(r->status);
    failure = Refusal(*r, "create", forbidden_for, options_.forbidden_for_good);
    // A 403 that lasts is news once more: then the role is named.
    kind = StrCat(r->status, forbidden_for >= options_.forbidden_for_good ? " lasting" : "");
    retry_after_s = r->retry_after_s;
  } else {
    json::Document d;
    const absl::Status parsed = json::Parse(r->body, "the dry-run slice", &d);
    const rapidjson::Value* spec = parsed.ok() ? Member(d, "spec") : nullptr;
    const rapidjson::Value* devices = spec ? Member(*spec, "devices") : nullptr;
    const rapidjson::Value* tainted =
        options_.taints ? ProbeDevice(devices, kTaintedDevice, basic) : nullptr;
    const rapidjson::Value* shared =
        with_shared_ ? ProbeDevice(devices, kSharedDevice, basic) : nullptr;
    if ((options_.taints && tainted == nullptr) || (with_shared_ && shared == nullptr)) {
      failure = StrCat(r->status, " without the probe's devices: ",
                       parsed.ok() ? Printable(r->body, 200) : std::string(parsed.message()));
      kind = "unreadable";
    } else {
      Answered(tainted, shared);
      return true;
    }
  }
  if (rest_->cancelled()) return true;  // cut off by the stop: nothing to report
  std::chrono::milliseconds wait = backoff_.Next();
  if (retry_after_s >= 0) {
    wait = std::max(wait, std::min<std::chrono::milliseconds>(std::chrono::seconds(retry_after_s),
                                                              kMaxRetryAfter));
  }
  due_ = std::chrono::steady_clock::now() + wait;
  // The same failure again is not news: one warning, then debug lines.
  const bool repeat = kind == last_failure_;
  last_failure_ = kind;
  const bool both = options_.taints && with_shared_;
  Log(repeat ? LogLevel::kDebug : LogLevel::kWarning,
      StrCat("ResourceSlices: cannot tell whether the API server keeps ",
             options_.taints ? "device taints" : "", both ? " and " : "",
             with_shared_ ? "consumable capacity" : "", ";",
             options_.taints ? " unhealthy devices leave the slices" : "", both ? " and" : "",
             with_shared_ ? " time-sliced ones are published whole" : "",
             " until it answers; asking again"),
      {{"node", options_.node}, {"error", failure}, {"retry_in", FormatDuration(wait)}});
  return false;
}

}  // namespace gpu_agent::dra
