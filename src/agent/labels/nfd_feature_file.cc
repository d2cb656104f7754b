#include "agent/labels/nfd_feature_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

// The agent's labels are a few KiB; a file past this is not one it wrote.
constexpr size_t kMaxFeatureFileBytes = 1u << 20;

// The file's content; nullopt when there is none.
absl::StatusOr<std::optional<std::string>> ReadIfThere(const std::string& path) {
  // In a folder node-feature-discovery reads: a link or a FIFO planted at
  // the name is not read (nor followed when it is replaced).
  absl::StatusOr<std::string> text = ReadFileBounded(path, kMaxFeatureFileBytes, Links::kRefuse);
  if (text.ok()) return std::optional<std::string>(*std::move(text));
  if (text.status().code() == absl::StatusCode::kNotFound) return std::optional<std::string>();
  return absl::UnavailableError(text.status().message());
}

}  // namespace

std::string NfdFeatureFileContent(const NodeLabels& labels) {
  return StrCat(kNfdHeader, LabelsAsLines(labels));
}

absl::StatusOr<bool> WriteNfdFeatureFile(const std::string& path, const NodeLabels& labels) {
  const std::string content = NfdFeatureFileContent(labels);
  absl::StatusOr<std::optional<std::string>> old = ReadIfThere(path);
  if (!old.ok()) return old.status();
  if (*old && **old == content) return false;
  if (*old && !(*old)->starts_with(kNfdHeader)) {
    return absl::FailedPreconditionError(
        StrCat(path,
               " exists and was not written by gpu-agent (no gpu-agent header): not "
               "replacing another tool's labels; point nodeLabels.nfdFile at another file"));
  }
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (absl::Status s = CheckTrustedFolder(folder, "nodeLabels.nfdFile"); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(path, content); !s.ok()) return s;
  return true;
}

absl::StatusOr<bool> RemoveOwnNfdFeatureFile(const std::string& path) {
  absl::StatusOr<std::optional<std::string>> old = ReadIfThere(path);
  if (!old.ok()) return old.status();
  if (!*old || !(*old)->starts_with(kNfdHeader)) return false;
  if (std::remove(path.c_str()) != 0 && errno != ENOENT) {
    return absl::UnavailableError(StrCat("cannot remove ", path, ": ", std::strerror(errno)));
  }
  return true;
}

void ApplyNfdOutput(const Config& config, const NodeLabels& labels) {
  const std::string& path = config.node_labels.nfd_file;
  if (path.empty()) return;
  if (config.node_labels.Effective(config.agent_mode()) == LabelOutput::kNfd) {
    absl::StatusOr<bool> wrote = WriteNfdFeatureFile(path, labels);
    if (!wrote.ok()) {
      LogError("cannot write the node-feature-discovery feature file",
               {{"file", path}, {"error", std::string(wrote.status().message())}});
    } else if (*wrote) {
      LogInfo("node-feature-discovery feature file written",
              {{"file", path}, {"labels", StrCat(labels.size())}});
    }
    return;
  }
  absl::StatusOr<bool> removed = RemoveOwnNfdFeatureFile(path);
  if (!removed.ok()) {
    LogWarning("cannot remove the agent's earlier node-feature-discovery feature file",
               {{"file", path}, {"error", std::string(removed.status().message())}});
  } else if (*removed) {
    LogInfo("labels no longer go to node-feature-discovery: removed the agent's feature file",
            {{"file", path}});
  }
}

}  // namespace gpu_agent
