// The node-feature-discovery (NFD) local feature file: "key=value" lines in
// /etc/kubernetes/node-feature-discovery/features.d/<file>, which nfd-worker
// reads and nfd-master turns into Node labels (for clusters that run NFD).
// The agent's file starts with kNfdHeader, which is how it knows the file
// is its own to rewrite or remove.
#ifndef GPU_AGENT_AGENT_LABELS_NFD_FEATURE_FILE_H_
#define GPU_AGENT_AGENT_LABELS_NFD_FEATURE_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/labels/gpu_labels.h"

namespace gpu_agent {

inline constexpr std::string_view kNfdHeader =
    "# Written by gpu-agent (nodeLabels.output: nfd): GPU labels with gpu-feature-discovery's "
    "keys.\n# Rewritten when they change; removed when the agent's labels are turned off.\n";

// The file's whole content: the header, then sorted "key=value" lines.
std::string NfdFeatureFileContent(const NodeLabels& labels);

// Makes `path` hold `labels` (atomically, and only when the content
// differs); true when it wrote. Refuses to replace a file that is not the
// agent's (no header): another tool's labels are not the agent's to drop.
absl::StatusOr<bool> WriteNfdFeatureFile(const std::string& path, const NodeLabels& labels);
// Removes `path` when it is the agent's file; true when it removed one.
absl::StatusOr<bool> RemoveOwnNfdFeatureFile(const std::string& path);

// What a start or reload does for the NFD output: with nodeLabels.output
// nfd, write the file; otherwise remove the agent's own file, if any, from
// the configured path. Failures are logged, not fatal: the GPUs still work.
void ApplyNfdOutput(const Config& config, const NodeLabels& labels);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_LABELS_NFD_FEATURE_FILE_H_
