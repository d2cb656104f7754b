#include "apiserver/label_patch.h"

#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

struct Plan {
  std::map<std::string, std::string> set;  // key -> value to write
  std::set<std::string> remove;
  std::set<std::string> owned;  // after the patch
  std::vector<std::string> foreign;
};

Plan Compute(const NodeView& node, const Labels& want) {
  Plan p;
  const std::set<std::string> owned = OwnedLabels(node);
  for (const auto& [key, value] : want) {
    const auto it = node.labels.find(key);
    const bool mine = owned.count(key) > 0;
    if (it == node.labels.end()) {
      p.set[key] = value;
      p.owned.insert(key);
    } else if (mine) {
      if (it->second != value) p.set[key] = value;
      p.owned.insert(key);
    } else if (it->second != value) {
      p.foreign.push_back(key);
    }
  }
  for (const std::string& key : owned) {
    if (want.count(key) > 0) continue;
    if (node.labels.count(key) > 0) p.remove.insert(key);
  }
  return p;
}

std::string AnnotationValue(const std::set<std::string>& keys) { return StrJoin(keys, ","); }

}  // namespace

std::set<std::string> OwnedLabels(const NodeView& node) {
  std::set<std::string> out;
  const auto it = node.annotations.find(kOwnedLabelsAnnotation);
  if (it == node.annotations.end()) return out;
  for (std::string_view k : StrSplit(it->second, ',')) {
    k = StripWhitespace(k);
    if (!k.empty()) out.emplace(k);
  }
  return out;
}

void PlanLabels(const NodeView& node, const Labels& want, JsonPatch* patch,
                std::vector<std::string>* foreign) {
  Plan p = Compute(node, want);
  if (foreign != nullptr) *foreign = p.foreign;
  const auto current = node.annotations.find(kOwnedLabelsAnnotation);
  const bool annotation_right = p.owned.empty() ? current == node.annotations.end()
                                                : current != node.annotations.end() &&
                                                      current->second == AnnotationValue(p.owned);
  if (p.set.empty() && p.remove.empty() && annotation_right) return;
  // A missing parent object is created whole: the API server rejects a
  // child of a missing parent.
  if (!p.set.empty()) {
    if (!node.has_labels) {
      patch->AddObject(JsonPointer({"metadata", "labels"}), p.set);
    } else {
      for (const auto& [k, v] : p.set) patch->Add(JsonPointer({"metadata", "labels", k}), v);
    }
  }
  for (const std::string& k : p.remove) patch->Remove(JsonPointer({"metadata", "labels", k}));
  if (annotation_right) return;
  if (p.owned.empty()) {
    patch->Remove(JsonPointer({"metadata", "annotations", kOwnedLabelsAnnotation}));
  } else if (!node.has_annotations) {
    patch->AddObject(JsonPointer({"metadata", "annotations"}),
                     {{kOwnedLabelsAnnotation, AnnotationValue(p.owned)}});
  } else {
    patch->Add(JsonPointer({"metadata", "annotations", kOwnedLabelsAnnotation}),
               AnnotationValue(p.owned));
  }
}

bool LabelsDiffer(const NodeView& node, const Labels& want) {
  JsonPatch patch;
  PlanLabels(node, want, &patch, nullptr);
  return !patch.empty();
}

namespace {

// `extra` after `base`; `base` gets the version test when it has no op yet.
JsonPatch Join(const NodeView& node, JsonPatch base, const JsonPatch& extra) {
  if (extra.empty()) return base;
  if (base.empty() && !node.resource_version.empty()) {
    base.Test(JsonPointer({"metadata", "resourceVersion"}), node.resource_version);
  }
  base.Append(extra);
  return base;
}

}  // namespace

JsonPatch PlanNode(const NodeView& node, const Capacities& want, bool allocatable,
                   const Labels* labels, std::vector<std::string>* foreign) {
  JsonPatch label_ops;
  if (labels != nullptr) PlanLabels(node, *labels, &label_ops, foreign);
  return Join(node, PlanSetCapacities(node, want, allocatable), label_ops);
}

JsonPatch PlanRemoveAll(const NodeView& node, const std::set<std::string>& resources,
                        bool allocatable, bool labels) {
  JsonPatch label_ops;
  if (labels) PlanLabels(node, {}, &label_ops, nullptr);
  return Join(node, PlanRemoveCapacities(node, resources, allocatable), label_ops);
}

}  // namespace gpu_agent::apiserver
