// The Node labels gpu-feature-discovery (GFD) documents, computed from the
// GPUs this agent exposes: same keys, same value formats, so a nodeSelector
// written for GFD works on a node labelled by the agent alone. Pure: works
// on inventory records, the config and what the device model decided
// (which GPUs, which time-slicing), passed in as plain data.
//
// No timestamp label: a value that changes on every start would make every
// node write on every restart.
#ifndef GPU_AGENT_AGENT_LABELS_GPU_LABELS_H_
#define GPU_AGENT_AGENT_LABELS_GPU_LABELS_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "nvml/inventory.h"

namespace gpu_agent {

using NodeLabels = std::map<std::string, std::string>;

struct LabelResult {
  NodeLabels labels;
  std::vector<std::string> warnings;  // e.g. several GPU models on one node
};

// How the device model time-sliced one extended resource
// (sharing.timeSlicing): its shared devices are advertised as `replicas`
// each, under a name of their own (`renamed`) or under the resource itself.
struct ResourceSharing {
  int replicas = 1;
  bool renamed = false;
};
// By resource name; a resource not listed is not shared.
using SharingByResource = std::map<std::string, ResourceSharing>;

// The labels for the GPUs at positions `gpus` of the inventory: those of the
// generation's device model (agent/plan/device_model.h, devices.* applied),
// so a GPU the model leaves out is not labelled either; `sharing` is the
// model's time-slicing, so the replicas labelled are those advertised. No
// GPU: no labels.
LabelResult ComputeNodeLabels(const Config& config, const nvml::Inventory& inv,
                              const std::vector<size_t>& gpus, const SharingByResource& sharing);

// A GPU or MIG product name as GFD writes it: characters other than
// [A-Za-z0-9-_. ] dropped, runs of blanks made one '-'. Then made a valid
// label value: leading and trailing non-alphanumerics dropped, and a value
// over 63 characters cut to its first 54 plus '-' and 8 hex digits of a
// hash of the whole, so two long names never end up the same.
std::string LabelValue(std::string_view text);

// The labels as "key=value" lines, sorted: node-feature-discovery's local
// feature file format (features.d), also `gpu-agent labels`' text output.
std::string LabelsAsLines(const NodeLabels& labels);
std::string LabelsAsJson(const NodeLabels& labels);
std::string LabelsAsYaml(const NodeLabels& labels);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_LABELS_GPU_LABELS_H_
