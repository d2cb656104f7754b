#include "dra/taint_probe.h"

#include <rapidjson/document.h>

#include <algorithm>

#include "apiserver/status.h"
#include "base/duration.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/text.h"
#include "dra/slice_refusal.h"

namespace gpu_agent::dra {

using json::Member;

namespace {

// The dry-run ResourceSlice: one device, "probe", with a NoSchedule taint
// and (`with_none`) a None one, in `api_version`'s shape (v1beta1's under
// "basic"). generateName: the server cuts the prefix so that the name it
// makes is valid however long the node's name (up to 253 characters); a dry
// run makes one too, and stores nothing.
std::string ProbeSlice(const TaintProbeOptions& o, const std::string& api_version, bool with_none) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  auto field = [&w](const char* key, std::string_view value) { json::WriteField(w, key, value); };
  auto taint = [&](const std::string& key, const char* effect) {
    w.StartObject();
    field("key", key);
    field("effect", effect);
    w.EndObject();
  };
  w.StartObject();
  field("apiVersion", StrCat("resource.k8s.io/", api_version));
  field("kind", "ResourceSlice");
  w.Key("metadata");
  w.StartObject();
  field("generateName", StrCat(o.node, "-taint-probe-"));
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
  w.StartObject();
  field("name", "probe");
  const bool basic = api_version == "v1beta1";
  if (basic) {
    w.Key("basic");
    w.StartObject();
  }
  w.Key("taints");
  w.StartArray();
  taint(StrCat(o.driver, "/probe"), "NoSchedule");
  if (with_none) taint(StrCat(o.driver, "/probe-none"), "None");
  w.EndArray();
  if (basic) w.EndObject();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return json::TextOf(buf);
}

}  // namespace

TaintProbe::TaintProbe(TaintProbeOptions options, apiserver::RestClient* rest)
    : options_(std::move(options)),
      rest_(rest),
      backoff_(Backoff::Doubling(options_.backoff_initial, options_.watch_timeout)) {}

void TaintProbe::Skip() {
  answered_ = true;
  kept_ = false;
}

bool TaintProbe::Ask(const std::string& api_version) {
  const bool basic = api_version == "v1beta1";
  const std::string body = ProbeSlice(options_, api_version, with_none_);
  absl::StatusOr<apiserver::HttpResponse> r = rest_->Post(
      StrCat("/apis/resource.k8s.io/", api_version, "/resourceslices?dryRun=All"), body);
  std::string failure;  // why there is no clear answer
  std::string kind;     // its kind: a repeat of the last is not logged again
  int retry_after_s = -1;
  if (!r.ok()) {
    failure = std::string(r.status().message());
    kind = "no answer";
  } else if ((r->status == 400 || r->status == 422) && with_none_) {
    // Refused with a None taint: a server that keeps taints but knows no
    // None effect (before 1.36). Asked again at once without it.
    with_none_ = false;
    LogInfo(
        "ResourceSlices: the API server refuses the None taint effect; degraded devices are "
        "published without a taint",
        {{"node", options_.node}, {"answer", apiserver::StatusMessage(*r)}});
    return Ask(api_version);
  } else if (r->status == 400 || r->status == 422) {
    // The server refuses the slice as invalid. A server that does not know
    // the field drops it and answers 201, so this is its validation (or an
    // admission policy) refusing a tainted device: the real slices' taints
    // would be refused the same way, and asking again gets the same answer.
    // A clear "taints cannot be used".
    answered_ = true;
    kept_ = false;
    LogWarning(
        "ResourceSlices: the API server refuses a slice with a device taint; an unhealthy device "
        "leaves the slices",
        {{"node", options_.node}, {"error", apiserver::StatusMessage(*r)}});
    return true;
  } else if (r->status < 200 || r->status >= 300) {
    // No answer about taints: a role without `create` on resourceslices (the
    // slices' own creates fail the same way until an operator grants it),
    // a throttle or an unavailable server.
    const std::chrono::steady_clock::duration forbidden_for = forbidden_.Answered(r->status);
    failure = Refusal(*r, "create", forbidden_for, options_.forbidden_for_good);
    // A 403 that lasts is news once more: then the role is named.
    kind = StrCat(r->status, forbidden_for >= options_.forbidden_for_good ? " lasting" : "");
    retry_after_s = r->retry_after_s;
  } else {
    rapidjson::Document d;
    const absl::Status parsed = json::Parse(r->body, "the dry-run slice", &d);
    const rapidjson::Value* spec = parsed.ok() ? Member(d, "spec") : nullptr;
    const rapidjson::Value* devices = spec ? Member(*spec, "devices") : nullptr;
    const rapidjson::Value* device =
        devices && devices->IsArray() && devices->Size() == 1 ? &(*devices)[0] : nullptr;
    if (device && basic) device = Member(*device, "basic");
    if (device == nullptr || !device->IsObject()) {
      failure = StrCat(r->status, " with no slice of one device: ",
                       parsed.ok() ? Printable(r->body, 200) : std::string(parsed.message()));
      kind = "unreadable";
    } else {
      const rapidjson::Value* kept = Member(*device, "taints");
      answered_ = true;
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
  Log(repeat ? LogLevel::kDebug : LogLevel::kWarning,
      "ResourceSlices: cannot tell whether the API server keeps device taints; unhealthy devices "
      "leave the slices until it answers; asking again",
      {{"node", options_.node}, {"error", failure}, {"retry_in", FormatDuration(wait)}});
  return false;
}

}  // namespace gpu_agent::dra
