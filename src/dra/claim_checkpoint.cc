#include "dra/claim_checkpoint.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>

#include "base/json.h"
#include "base/strings.h"
#include "dra/claim_ref.h"
#include "dra/dra_device.h"

namespace gpu_agent::dra {
namespace {

using json::Member;
using json::Strings;
using json::Writer;
using json::WriteString;

void WriteStrings(Writer& w, const std::vector<std::string>& v) {
  w.StartArray();
  for (const std::string& s : v) WriteString(w, s);
  w.EndArray();
}

}  // namespace

std::string RenderCheckpoint(const PreparedClaims& claims) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  w.Key("version");
  w.Int(2);
  w.Key("claims");
  w.StartObject();
  for (const auto& [uid, e] : claims) {
    w.Key(uid.c_str(), static_cast<rapidjson::SizeType>(uid.size()));
    w.StartObject();
    w.Key("namespace");
    WriteString(w, e.name_space);
    w.Key("name");
    WriteString(w, e.name);
    if (e.from_spec) {
      w.Key("fromSpec");
      w.Bool(true);
    }
    if (!e.time_sliced.empty()) {
      w.Key("timeSliced");
      WriteStrings(w, e.time_sliced);
    }
    w.Key("devices");
    w.StartArray();
    for (const PreparedClaim::Device& dev : e.devices) {
      const PreparedDevice& d = dev.answer;
      w.StartObject();
      w.Key("requests");
      WriteStrings(w, d.request_names);
      w.Key("pool");
      WriteString(w, d.pool);
      w.Key("device");
      WriteString(w, d.device);
      w.Key("cdiIds");
      WriteStrings(w, d.cdi_ids);
      if (!dev.uuid.empty()) {
        w.Key("uuid");
        WriteString(w, dev.uuid);
      }
      if (dev.admin_access) {
        w.Key("adminAccess");
        w.Bool(true);
      }
      if (!d.share_id.empty()) {
        w.Key("shareID");
        WriteString(w, d.share_id);
        w.Key("shares");
        w.Int64(dev.shares);
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

absl::StatusOr<PreparedClaims> ParseCheckpoint(std::string_view record) {
  json::Document d;
  if (absl::Status s = json::Parse(record, "its record", &d); !s.ok()) return s;
  if (!d.IsObject()) return absl::InvalidArgumentError("not a JSON object");
  const rapidjson::Value* v = Member(d, "version");
  if (!v || !v->IsInt() || v->GetInt() < 1 || v->GetInt() > 2) {
    return absl::InvalidArgumentError("no version 1 or 2");
  }
  const rapidjson::Value* claims = Member(d, "claims");
  if (!claims || !claims->IsObject()) return absl::InvalidArgumentError("no claims object");
  PreparedClaims out;
  for (const auto& m : claims->GetObject()) {
    if (absl::Status bad = ValidateClaimUid(m.name.GetString()); !bad.ok()) return bad;
    PreparedClaim e;
    e.name_space = json::String(m.value, "namespace");
    e.name = json::String(m.value, "name");
    const rapidjson::Value* from_spec = Member(m.value, "fromSpec");
    e.from_spec = from_spec != nullptr && from_spec->IsBool() && from_spec->GetBool();
    e.time_sliced = Strings(Member(m.value, "timeSliced"));
    const rapidjson::Value* devices = Member(m.value, "devices");
    if (devices == nullptr || !devices->IsArray()) {
      return absl::InvalidArgumentError(
          StrCat("claim ", m.name.GetString(), " has no devices list"));
    }
    for (const auto& dv : devices->GetArray()) {
      PreparedClaim::Device device;
      device.answer = {Strings(Member(dv, "requests")), json::String(dv, "pool"),
                       json::String(dv, "device"), Strings(Member(dv, "cdiIds")),
                       json::String(dv, "shareID")};
      device.uuid = json::String(dv, "uuid");
      const rapidjson::Value* admin = Member(dv, "adminAccess");
      device.admin_access = admin != nullptr && admin->IsBool() && admin->GetBool();
      if (!device.answer.share_id.empty()) {
        // A share whose count is unreadable holds one; none more than a
        // device can have.
        const rapidjson::Value* shares = Member(dv, "shares");
        device.shares = shares && shares->IsInt64() && shares->GetInt64() > 0
                            ? std::min(shares->GetInt64(), kMaxShares)
                            : 1;
      }
      e.devices.push_back(std::move(device));
    }
    out[m.name.GetString()] = std::move(e);
  }
  return out;
}

}  // namespace gpu_agent::dra
