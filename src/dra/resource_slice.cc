#include "dra/resource_slice.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>

#include "base/crc32c.h"
#include "base/json.h"
#include "base/resource_name.h"
#include "base/strings.h"

namespace gpu_agent::dra {
namespace {

using json::Writer;

void Key(Writer& w, const std::string& k) { w.Key(k.c_str(), static_cast<unsigned>(k.size())); }

void WriteAttribute(Writer& w, const AttributeValue& v) {
  w.StartObject();
  switch (v.type) {
    case AttributeValue::Type::kInt:
      w.Key("int");
      w.Int64(v.number);
      break;
    case AttributeValue::Type::kBool:
      w.Key("bool");
      w.Bool(v.flag);
      break;
    case AttributeValue::Type::kString:
      w.Key("string");
      json::WriteString(w, v.text);
      break;
    case AttributeValue::Type::kVersion:
      w.Key("version");
      json::WriteString(w, v.text);
      break;
  }
  w.EndObject();
}

void Quantity(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  json::WriteString(w, value);
}

// One capacity of a shared device: consumed by each claim, `per_share`
// unless it asks for more (up to `most`, "" for all of it), at least `least`
// and in steps of `step` ("" for none).
void WriteConsumable(Writer& w, const std::string& value, const std::string& per_share,
                     const std::string& least, const std::string& most, const std::string& step) {
  w.StartObject();
  Quantity(w, "value", value);
  w.Key("requestPolicy");
  w.StartObject();
  Quantity(w, "default", per_share);
  w.Key("validRange");
  w.StartObject();
  Quantity(w, "min", least);
  Quantity(w, "max", most.empty() ? value : most);
  if (!step.empty()) Quantity(w, "step", step);
  w.EndObject();
  w.EndObject();
  w.EndObject();
}

// `taint`: null for none. `shared`: d.sharing published (the server serves
// consumable capacity and d is shared).
void WriteDeviceFields(Writer& w, const DraDevice& d, const DeviceTaint* taint, bool shared) {
  w.Key("attributes");
  w.StartObject();
  for (const auto& [name, value] : d.attributes) {
    Key(w, name);
    WriteAttribute(w, value);
  }
  w.EndObject();
  w.Key("capacity");
  w.StartObject();
  for (const auto& [name, quantity] : d.capacity) {
    Key(w, name);
    auto per_share = d.sharing.per_share.find(name);
    if (shared && per_share != d.sharing.per_share.end()) {
      // A claim reserves at least its share, more if it asks.
      WriteConsumable(w, quantity, per_share->second, per_share->second, "", "");
      continue;
    }
    w.StartObject();
    Quantity(w, "value", quantity);
    w.EndObject();
  }
  if (shared) {
    Key(w, kSharesCapacity);
    WriteSharesCapacity(w, d.sharing.shares, d.sharing.most_per_claim);
  }
  w.EndObject();
  if (shared) {
    w.Key("allowMultipleAllocations");
    w.Bool(true);
  }
  if (taint != nullptr) {
    w.Key("taints");
    w.StartArray();
    w.StartObject();
    w.Key("key");
    json::WriteString(w, taint->key);
    if (!taint->value.empty()) {
      w.Key("value");
      json::WriteString(w, taint->value);
    }
    w.Key("effect");
    json::WriteString(w, TaintEffectName(taint->effect));
    w.EndObject();
    w.EndArray();
  }
}

}  // namespace

void WriteSharesCapacity(json::Writer& w, int shares, int most_per_claim) {
  WriteConsumable(w, DecimalQuantity(shares), "1", "1", DecimalQuantity(most_per_claim), "1");
}

std::string TaintValue(const std::string& reason) {
  std::string v;
  for (char c : reason) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    v += ok ? c : '-';
  }
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (v.size() > 63) v.resize(63);
  while (!v.empty() && !alnum(v.back())) v.pop_back();
  size_t start = 0;
  while (start < v.size() && !alnum(v[start])) ++start;
  v = v.substr(start);
  return v.empty() ? "Unhealthy" : v;
}

std::string SliceName(const std::string& node, const std::string& driver, size_t n) {
  std::string name = StrCat(node, "-", driver, "-", n);
  if (name.size() <= kMaxDnsSubdomain) return name;
  // Too long for an object name (a node name may have 253 characters):
  // the node's name cut, and a hash of all of it so two nodes that share the
  // cut part still differ; the same node always gets the same name.
  char hash[9];
  std::snprintf(hash, sizeof hash, "%08x", Crc32c(node));
  const std::string tail = StrCat("-", hash, "-", driver, "-", n);
  std::string head = node.substr(0, kMaxDnsSubdomain - std::min(tail.size(), kMaxDnsSubdomain));
  while (!head.empty() && (head.back() == '-' || head.back() == '.')) head.pop_back();
  return head + tail;
}

std::vector<std::string> BuildResourceSlices(const SliceInput& input) {
  const size_t per_slice = input.tainted.empty() ? kMaxDevicesPerSlice : kMaxDevicesPerTaintedSlice;
  const size_t count = std::max<size_t>(1, (input.devices.size() + per_slice - 1) / per_slice);
  const bool basic = input.api_version == "v1beta1";
  std::vector<std::string> out;
  for (size_t n = 0; n < count; ++n) {
    rapidjson::StringBuffer buf;
    Writer w(buf);
    w.StartObject();
    w.Key("apiVersion");
    json::WriteString(w, StrCat("resource.k8s.io/", input.api_version));
    w.Key("kind");
    w.String("ResourceSlice");
    w.Key("metadata");
    w.StartObject();
    w.Key("name");
    json::WriteString(w, SliceName(input.node, input.driver, n));
    if (!input.node_uid.empty()) {
      w.Key("ownerReferences");
      w.StartArray();
      w.StartObject();
      w.Key("apiVersion");
      w.String("v1");
      w.Key("kind");
      w.String("Node");
      w.Key("name");
      json::WriteString(w, input.node);
      w.Key("uid");
      json::WriteString(w, input.node_uid);
      w.Key("controller");
      w.Bool(true);
      w.EndObject();
      w.EndArray();
    }
    w.EndObject();
    w.Key("spec");
    w.StartObject();
    w.Key("driver");
    json::WriteString(w, input.driver);
    w.Key("nodeName");
    json::WriteString(w, input.node);
    w.Key("pool");
    w.StartObject();
    w.Key("name");
    json::WriteString(w, input.node);
    w.Key("generation");
    w.Int64(input.pool_generation);
    w.Key("resourceSliceCount");
    w.Uint64(count);
    w.EndObject();
    w.Key("devices");
    w.StartArray();
    const size_t first = n * per_slice;
    const size_t last = std::min(input.devices.size(), first + per_slice);
    for (size_t i = first; i < last; ++i) {
      const DraDevice& d = input.devices[i];
      auto found = input.tainted.find(d.name);
      const DeviceTaint* taint = found == input.tainted.end() ? nullptr : &found->second;
      const bool shared = input.consumable_capacity && d.sharing.shared();
      w.StartObject();
      w.Key("name");
      json::WriteString(w, d.name);
      if (basic) {
        w.Key("basic");
        w.StartObject();
        WriteDeviceFields(w, d, taint, shared);
        w.EndObject();
      } else {
        WriteDeviceFields(w, d, taint, shared);
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    w.EndObject();
    out.push_back(buf.GetString());
  }
  return out;
}

}  // namespace gpu_agent::dra
