// The JSON patch operations that bring a Node's metadata.labels to what the
// agent wants, touching only keys the agent owns.
//
// Ownership is recorded on the Node itself, in the annotation
// kOwnedLabelsAnnotation: the sorted, comma-separated keys the agent wrote.
// A key it owns and no longer wants (GPU count changed, MIG strategy
// changed, labels turned off) is removed; a key present with another value
// and not in the annotation belongs to another writer (gpu-feature-discovery,
// an operator, a person) and is left alone; a key present with the wanted
// value and not owned is left alone too (it is right, and someone else may
// depend on keeping it).
//
// Labels ride in the same PATCH as capacity, to nodes/status: for v1 Node the
// status subresource keeps metadata changes (only spec is reset), a legacy
// behaviour kube-apiserver keeps on purpose for Node and a few other core
// kinds, so one request carries both and needs no extra RBAC rule.
#ifndef GPU_AGENT_APISERVER_LABEL_PATCH_H_
#define GPU_AGENT_APISERVER_LABEL_PATCH_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "apiserver/json_patch.h"
#include "apiserver/node.h"

namespace gpu_agent::apiserver {

inline constexpr const char* kOwnedLabelsAnnotation = "gpu-agent.github.io/owned-labels";

using Labels = std::map<std::string, std::string>;

// The keys the annotation on `node` names.
std::set<std::string> OwnedLabels(const NodeView& node);

// Appends to `patch` what makes `node` carry `want` (keys the agent may
// write) and drops owned keys not in `want`; updates the annotation. Keys
// held by another writer with another value go to `foreign` (may be null).
// Appends nothing when the Node is already right. Does not add the
// resourceVersion test: the caller starts the patch with it.
void PlanLabels(const NodeView& node, const Labels& want, JsonPatch* patch,
                std::vector<std::string>* foreign);

// Whether PlanLabels would append anything.
bool LabelsDiffer(const NodeView& node, const Labels& want);

// One patch for capacity (PlanSetCapacities) and, when `labels` is given,
// labels (PlanLabels), guarded by a test of metadata.resourceVersion. Empty
// when the Node is right.
JsonPatch PlanNode(const NodeView& node, const Capacities& want, bool allocatable,
                   const Labels* labels, std::vector<std::string>* foreign);
// One patch that removes `resources` (PlanRemoveCapacities) and, with
// `labels`, every label the agent owns and its annotation.
JsonPatch PlanRemoveAll(const NodeView& node, const std::set<std::string>& resources,
                        bool allocatable, bool labels);

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_LABEL_PATCH_H_
