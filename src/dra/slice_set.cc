#include "dra/slice_set.h"

#include <algorithm>

#include "apiserver/status.h"
#include "base/json.h"
#include "dra/slice_json.h"

namespace gpu_agent::dra {
namespace {

using json::Member;

// Every member `want` sets is in `have` with the same value; members only
// `have` holds (defaults the server adds) do not count.
// Recursive, over documents of bounded depth (base/json).
bool Covers(const rapidjson::Value& have, const rapidjson::Value& want) {
  if (want.IsObject()) {
    if (!have.IsObject()) return false;
    for (const auto& m : want.GetObject()) {
      auto it = have.FindMember(m.name);
      if (it == have.MemberEnd() || !Covers(it->value, m.value)) return false;
    }
    return true;
  }
  if (want.IsArray()) {
    if (!have.IsArray() || have.Size() != want.Size()) return false;
    for (rapidjson::SizeType i = 0; i < want.Size(); ++i) {
      if (!Covers(have[i], want[i])) return false;
    }
    return true;
  }
  return have == want;
}

// Whether `have` holds a member `key` that `want` lacks (either null: none).
bool OnlyIn(const rapidjson::Value* have, const rapidjson::Value* want, const char* key) {
  return have && Member(*have, key) && !(want && Member(*want, key));
}

// Whether every member name of the object `have` is one `want` has too.
bool NamesWithin(const rapidjson::Value* have, const rapidjson::Value* want) {
  if (have == nullptr || !have->IsObject()) return true;
  for (const auto& m : have->GetObject()) {
    if (want == nullptr || !want->IsObject() || !want->HasMember(m.name)) return false;
  }
  return true;
}

// What the agent writes into a device and may stop writing, which Covers
// does not see go (it passes over what only `have` holds): a taint, a
// shared device's allowMultipleAllocations and request policies, and
// attributes and capacities by name. The server adds none of these, so
// left over in `have` they are an earlier write's: a device that recovered
// before a restart, sharing turned off.
bool NoneLeftOver(const rapidjson::Value& have_spec, const rapidjson::Value& want_spec) {
  const rapidjson::Value* hd = Member(have_spec, "devices");
  const rapidjson::Value* wd = Member(want_spec, "devices");
  if (!hd || !wd || !hd->IsArray() || !wd->IsArray() || hd->Size() != wd->Size()) return true;
  for (rapidjson::SizeType i = 0; i < hd->Size(); ++i) {
    const rapidjson::Value* h = &(*hd)[i];
    const rapidjson::Value* w = &(*wd)[i];
    if (const rapidjson::Value* basic = Member(*h, "basic")) {  // v1beta1
      h = basic;
      w = Member(*w, "basic");
    }
    if (OnlyIn(h, w, "taints") || OnlyIn(h, w, "allowMultipleAllocations") ||
        !NamesWithin(Member(*h, "attributes"), w ? Member(*w, "attributes") : nullptr)) {
      return false;
    }
    const rapidjson::Value* hc = Member(*h, "capacity");
    const rapidjson::Value* wc = w ? Member(*w, "capacity") : nullptr;
    if (!NamesWithin(hc, wc)) return false;
    if (hc == nullptr || !hc->IsObject()) continue;
    for (const auto& c : hc->GetObject()) {
      if (OnlyIn(&c.value, wc ? Member(*wc, c.name.GetString()) : nullptr, "requestPolicy")) {
        return false;
      }
    }
  }
  return true;
}

std::map<std::string, std::string> ByName(const std::vector<std::string>& slices) {
  std::map<std::string, std::string> out;
  for (const std::string& s : slices) out[StringAt(*ParseHeld(s), "metadata", "name")] = s;
  return out;
}

}  // namespace

std::string StringAt(const rapidjson::Value& v, const char* a, const char* b) {
  const rapidjson::Value* x = Member(v, a);
  return x ? json::String(*x, b) : "";
}

std::unique_ptr<json::Document> ParseHeld(const std::string& text) {
  auto d = std::make_unique<json::Document>();
  (void)json::Parse(text, "a ResourceSlice", d.get());
  return d;
}

std::string SpecString(const rapidjson::Value& slice, const char* key) {
  const rapidjson::Value* spec = Member(slice, "spec");
  return spec ? json::String(*spec, key) : "";
}

int64_t PoolGeneration(const rapidjson::Value& slice) {
  const rapidjson::Value* spec = Member(slice, "spec");
  const rapidjson::Value* pool = spec ? Member(*spec, "pool") : nullptr;
  const rapidjson::Value* g = pool ? Member(*pool, "generation") : nullptr;
  return g && g->IsInt64() ? g->GetInt64() : 0;
}

void SliceSet::Wrote(const std::string& name, const std::string& resource_version) {
  constexpr size_t kKept = 8;
  std::deque<std::string>& rvs = written[name];
  rvs.push_back(resource_version);
  if (rvs.size() > kKept) rvs.pop_front();
}

bool SliceSet::StaleEcho(const std::string& name, const std::string& resource_version) const {
  auto w = written.find(name);
  if (w == written.end() || resource_version.empty()) return false;
  const std::deque<std::string>& rvs = w->second;
  if (std::find(rvs.begin(), rvs.end(), resource_version) == rvs.end()) return false;
  // A write of this publisher's to a slice it has deleted since.
  auto h = have.find(name);
  if (h == have.end()) return true;
  const std::string& latest = rvs.back();
  if (resource_version == latest) return false;
  const std::unique_ptr<json::Document> hd = ParseHeld(h->second);
  const rapidjson::Value* meta = Member(*hd, "metadata");
  return (meta ? json::String(*meta, "resourceVersion") : "") == latest;
}

bool SliceSet::Matches(const std::string& name) const {
  auto w = want.find(name);
  auto h = have.find(name);
  if (w == want.end()) return h == have.end();
  if (h == have.end()) return false;
  const std::unique_ptr<json::Document> wd = ParseHeld(w->second), hd = ParseHeld(h->second);
  const rapidjson::Value* ws = Member(*wd, "spec");
  const rapidjson::Value* hs = Member(*hd, "spec");
  if (!ws || !hs || !Covers(*hs, *ws) || !NoneLeftOver(*hs, *ws)) return false;
  // The owner, once the agent names one.
  const rapidjson::Value* wm = Member(*wd, "metadata");
  const rapidjson::Value* hm = Member(*hd, "metadata");
  const rapidjson::Value* wo = wm ? Member(*wm, "ownerReferences") : nullptr;
  if (wo == nullptr) return true;
  const rapidjson::Value* ho = hm ? Member(*hm, "ownerReferences") : nullptr;
  return ho && Covers(*ho, *wo);
}

bool SliceSet::AllMatch() const {
  for (const auto& [name, _] : want) {
    if (!Matches(name)) return false;
  }
  for (const auto& [name, _] : have) {
    if (!want.count(name)) return false;
  }
  return true;
}

void SliceSet::Want(const std::vector<std::string>& slices) { want = ByName(slices); }

bool SliceSet::Wants(const std::vector<std::string>& slices) const {
  return ByName(slices) == want;
}

absl::StatusOr<SliceWatchEvent> ParseSliceWatchEvent(std::string_view line) {
  json::Document ev;
  if (absl::Status s = json::Parse(line, "a ResourceSlice watch event", &ev); !s.ok()) return s;
  const rapidjson::Value* type = Member(ev, "type");
  const rapidjson::Value* object = Member(ev, "object");
  if (type == nullptr || !type->IsString() || type->GetStringLength() == 0) {
    return absl::InvalidArgumentError("a ResourceSlice watch event without a type");
  }
  if (object == nullptr || !object->IsObject()) {
    return absl::InvalidArgumentError("a ResourceSlice watch event without an object");
  }
  SliceWatchEvent out;
  out.type.assign(type->GetString(), type->GetStringLength());
  out.object = json::Serialize(*object);
  if (out.type == "ERROR") {
    out.code = apiserver::ReadStatus(out.object).code;
  } else {
    out.name = StringAt(*object, "metadata", "name");
    out.resource_version = StringAt(*object, "metadata", "resourceVersion");
    out.driver = SpecString(*object, "driver");
    out.node_name = SpecString(*object, "nodeName");
  }
  return out;
}

}  // namespace gpu_agent::dra
