#include "apiserver/node.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

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

std::string DescribeOffset(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return StrCat("line ", line, ", column ", col);
}

absl::StatusOr<NodeView> ParseNode(std::string_view json) {
  if (json.size() > kMaxObjectBytes) {
    return absl::InvalidArgumentError(StrCat("Node object of ", json.size(), " bytes is over the ",
                                             kMaxObjectBytes, "-byte limit"));
  }
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(StrCat(
        "the API server sent invalid JSON (", rapidjson::GetParseError_En(doc.GetParseError()),
        " at ", DescribeOffset(json, doc.GetErrorOffset()), ")"));
  }
  if (!doc.IsObject())
    return absl::InvalidArgumentError("the API server sent JSON that is not an object");
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
  if (auto n = meta->value.FindMember("name");
      n != meta->value.MemberEnd() && n->value.IsString()) {
    node.name = n->value.GetString();
  }
  if (auto rv = meta->value.FindMember("resourceVersion");
      rv != meta->value.MemberEnd() && rv->value.IsString()) {
    node.resource_version = rv->value.GetString();
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
  }
  return node;
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
