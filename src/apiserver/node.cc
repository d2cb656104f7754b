#include "apiserver/node.h"

#include <rapidjson/document.h>

#include "apiserver/status.h"
#include "base/json.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

void ReadQuantities(const rapidjson::Value& obj, std::map<std::string, std::string>* out) {
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    if (it->value.IsString()) {
      (*out)[std::string(it->name.GetString(), it->name.GetStringLength())] =
          std::string(it->value.GetString(), it->value.GetStringLength());
    }
  }
}

}  // namespace

std::optional<std::string> NodeView::Capacity(const std::string& r) const {
  auto it = capacity.find(r);
  if (it == capacity.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> NodeView::Allocatable(const std::string& r) const {
  auto it = allocatable.find(r);
  if (it == allocatable.end()) return std::nullopt;
  return it->second;
}

namespace {

// Parses JSON from the API server (base/json: iterative, bounded in size
// and depth) into an object.
absl::Status ParseDocument(std::string_view json, const char* what, rapidjson::Document* doc) {
  if (absl::Status s = json::Parse(json, StrCat("the API server's ", what), doc,
                                   {kMaxObjectBytes, json::kMaxDepth});
      !s.ok()) {
    return s;
  }
  if (!doc->IsObject()) {
    return absl::InvalidArgumentError(
        StrCat("the API server sent a ", what, " that is not an object"));
  }
  return absl::OkStatus();
}

std::string ResourceVersionOf(const rapidjson::Value& obj) {
  if (!obj.IsObject()) return "";
  auto meta = obj.FindMember("metadata");
  return meta == obj.MemberEnd() ? "" : json::String(meta->value, "resourceVersion");
}

absl::StatusOr<NodeView> ParseNodeObject(const rapidjson::Value& doc) {
  if (!doc.IsObject()) return absl::InvalidArgumentError("the Node is not a JSON object");
  auto kind = doc.FindMember("kind");
  if (kind != doc.MemberEnd() && kind->value.IsString() &&
      std::string_view(kind->value.GetString()) != "Node") {
    return absl::InvalidArgumentError(
        StrCat("expected a Node, the API server sent a ", kind->value.GetString()));
  }
  NodeView node;
  auto meta = doc.FindMember("metadata");
  if (meta == doc.MemberEnd() || !meta->value.IsObject()) {
    return absl::InvalidArgumentError("the Node has no metadata");
  }
  node.name = json::String(meta->value, "name");
  node.resource_version = json::String(meta->value, "resourceVersion");
  if (auto l = meta->value.FindMember("labels");
      l != meta->value.MemberEnd() && l->value.IsObject()) {
    node.has_labels = true;
    ReadQuantities(l->value, &node.labels);
  }
  if (auto a = meta->value.FindMember("annotations");
      a != meta->value.MemberEnd() && a->value.IsObject()) {
    node.has_annotations = true;
    ReadQuantities(a->value, &node.annotations);
  }
  auto status = doc.FindMember("status");
  if (status != doc.MemberEnd() && status->value.IsObject()) {
    node.has_status = true;
    if (auto c = status->value.FindMember("capacity");
        c != status->value.MemberEnd() && c->value.IsObject()) {
      node.has_capacity = true;
      ReadQuantities(c->value, &node.capacity);
    }
    if (auto a = status->value.FindMember("allocatable");
        a != status->value.MemberEnd() && a->value.IsObject()) {
      node.has_allocatable = true;
      ReadQuantities(a->value, &node.allocatable);
    }
    if (auto c = status->value.FindMember("conditions");
        c != status->value.MemberEnd() && c->value.IsArray()) {
      for (const auto& cond : c->value.GetArray()) {
        if (const std::string type = json::String(cond, "type"); !type.empty()) {
          node.condition_types.insert(type);
        }
      }
    }
  }
  return node;
}

}  // namespace

absl::StatusOr<NodeView> ParseNode(std::string_view json) {
  json::Document doc;
  if (absl::Status s = ParseDocument(json, "Node", &doc); !s.ok()) return s;
  return ParseNodeObject(doc);
}

absl::StatusOr<NodeList> ParseNodeList(std::string_view json) {
  json::Document doc;
  if (absl::Status s = ParseDocument(json, "NodeList", &doc); !s.ok()) return s;
  if (const std::string kind = json::String(doc, "kind"); !kind.empty() && kind != "NodeList") {
    return absl::InvalidArgumentError(StrCat("expected a NodeList, the API server sent a ", kind));
  }
  NodeList list;
  list.resource_version = ResourceVersionOf(doc);
  if (list.resource_version.empty()) {
    return absl::InvalidArgumentError("the NodeList has no metadata.resourceVersion to watch from");
  }
  auto items = doc.FindMember("items");
  if (items == doc.MemberEnd() || items->value.IsNull()) return list;  // an empty list
  if (!items->value.IsArray())
    return absl::InvalidArgumentError("the NodeList's items is not a list");
  for (const rapidjson::Value& item : items->value.GetArray()) {
    absl::StatusOr<NodeView> node = ParseNodeObject(item);
    if (!node.ok()) return node.status();
    list.items.push_back(*std::move(node));
  }
  return list;
}

absl::StatusOr<WatchEvent> ParseWatchEvent(std::string_view line) {
  json::Document doc;
  if (absl::Status s = ParseDocument(line, "watch event", &doc); !s.ok()) return s;
  const std::string type = json::String(doc, "type");
  auto obj = doc.FindMember("object");
  if (obj == doc.MemberEnd() || !obj->value.IsObject()) {
    return absl::InvalidArgumentError(StrCat("the watch event \"", type, "\" has no object"));
  }
  WatchEvent ev;
  if (type == "ERROR") {
    ev.type = WatchEvent::Type::kError;
    const ApiStatus status = ReadStatus(json::Serialize(obj->value));
    ev.code = status.code;
    ev.message = status.message;
    return ev;
  }
  ev.resource_version = ResourceVersionOf(obj->value);
  if (ev.resource_version.empty()) {
    return absl::InvalidArgumentError(
        StrCat("the watch event \"", type, "\" has no metadata.resourceVersion"));
  }
  if (type == "BOOKMARK") {
    ev.type = WatchEvent::Type::kBookmark;
    return ev;
  }
  if (type == "ADDED") {
    ev.type = WatchEvent::Type::kAdded;
  } else if (type == "MODIFIED") {
    ev.type = WatchEvent::Type::kModified;
  } else if (type == "DELETED") {
    ev.type = WatchEvent::Type::kDeleted;
  } else {
    return absl::InvalidArgumentError(StrCat("unknown watch event type \"", type, "\""));
  }
  absl::StatusOr<NodeView> node = ParseNodeObject(obj->value);
  if (!node.ok()) return node.status();
  ev.node = *std::move(node);
  return ev;
}

JsonPatch PlanSetCapacities(const NodeView& node, const Capacities& want, bool allocatable) {
  std::map<std::string, std::string> cap_fix, alloc_fix;
  for (const auto& [resource, value] : want) {
    const std::string v = StrCat(value);
    if (node.Capacity(resource) != v) cap_fix[resource] = v;
    if (allocatable && node.Allocatable(resource) != v) alloc_fix[resource] = v;
  }
  JsonPatch patch;
  if (cap_fix.empty() && alloc_fix.empty()) return patch;
  // Apply only to the version this plan was made from.
  if (!node.resource_version.empty()) {
    patch.Test(JsonPointer({"metadata", "resourceVersion"}), node.resource_version);
  }
  // The API server rejects a child of a missing parent: create parents.
  if (!node.has_status) patch.AddObject(JsonPointer({"status"}), {});
  auto set = [&](const char* field, bool has_parent,
                 const std::map<std::string, std::string>& fix) {
    if (fix.empty()) return;
    if (!has_parent) {
      patch.AddObject(JsonPointer({"status", field}), fix);
      return;
    }
    for (const auto& [resource, v] : fix) patch.Add(JsonPointer({"status", field, resource}), v);
  };
  set("capacity", node.has_capacity, cap_fix);
  set("allocatable", node.has_allocatable, alloc_fix);
  return patch;
}

JsonPatch PlanSetCapacity(const NodeView& node, const std::string& resource, int64_t value,
                          bool allocatable) {
  return PlanSetCapacities(node, {{resource, value}}, allocatable);
}

JsonPatch PlanRemoveCapacities(const NodeView& node, const std::set<std::string>& resources,
                               bool allocatable) {
  JsonPatch patch;
  bool any = false;
  for (const std::string& r : resources) {
    any |= node.Capacity(r).has_value() || (allocatable && node.Allocatable(r).has_value());
  }
  if (!any) return patch;
  if (!node.resource_version.empty()) {
    patch.Test(JsonPointer({"metadata", "resourceVersion"}), node.resource_version);
  }
  for (const std::string& r : resources) {
    if (node.Capacity(r).has_value()) patch.Remove(JsonPointer({"status", "capacity", r}));
    if (allocatable && node.Allocatable(r).has_value()) {
      patch.Remove(JsonPointer({"status", "allocatable", r}));
    }
  }
  return patch;
}

JsonPatch PlanRemoveCapacity(const NodeView& node, const std::string& resource, bool allocatable) {
  return PlanRemoveCapacities(node, {resource}, allocatable);
}

}  // namespace gpu_agent::apiserver
