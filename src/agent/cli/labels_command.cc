#include "agent/cli/labels_command.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "agent/config/api_connection.h"
#include "agent/labels/gpu_labels.h"
#include "agent/plan/generation.h"
#include "apiserver/label_patch.h"
#include "apiserver/node_client.h"
#include "base/exit_code.h"
#include "base/resource_name.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "gpu-agent labels: %s\n", msg.c_str());
  return code;
}

std::string Keys(const std::vector<std::string>& keys) {
  return keys.empty() ? "none" : StrJoin(keys, ", ");
}

}  // namespace

int LabelsCommand(const LoadedConfig& loaded, const LabelsRequest& req) {
  const Config& config = loaded.config;
  std::string node;
  if (!req.verb.empty()) {
    node = req.node.empty() ? config.node_name : req.node;
    if (node.empty()) return Fail(kExitUsage, "no node: pass --node or set NODE_NAME");
    if (absl::Status s = ValidateNodeName(node); !s.ok()) {
      return Fail(kExitUsage, StrCat("--node: ", s.message()));
    }
  }
  apiserver::Labels want;
  if (req.verb != "remove") {
    // The labels of the generation `run` would build, so a config `run`
    // refuses is refused here too.
    absl::StatusOr<std::shared_ptr<const Generation>> gen =
        DiscoverGeneration(loaded, GenerationOptionsFor(config));
    if (!gen.ok()) return Fail(ExitCodeFor(gen.status()), std::string(gen.status().message()));
    for (const std::string& w : (*gen)->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    want = (*gen)->labels.labels;
  }
  if (req.verb.empty()) {
    const std::string text = req.output == "json"   ? LabelsAsJson(want)
                             : req.output == "yaml" ? LabelsAsYaml(want)
                                                    : LabelsAsLines(want);
    std::printf("%s", text.c_str());
    return kExitOk;
  }
  int exit_code = kExitFailure;
  absl::StatusOr<std::unique_ptr<apiserver::RestClient>> rest =
      CommandRestClient(config, &exit_code);
  if (!rest.ok()) return Fail(exit_code, std::string(rest.status().message()));
  apiserver::NodeClient client(rest->get(), node);
  // Which keys are the agent's is on the Node: even a dry run reads it.
  std::vector<std::string> foreign;
  auto plan = [&](const apiserver::NodeView& n) {
    return apiserver::PlanNode(n, {}, false, &want, &foreign);
  };
  if (req.dry_run) {
    absl::StatusOr<apiserver::NodeView> view = client.Get();
    if (!view.ok()) return Fail(kExitFailure, std::string(view.status().message()));
    const apiserver::JsonPatch patch = plan(*view);
    if (patch.empty()) {
      std::printf("node %s: labels already right; nothing would be sent\n", node.c_str());
    } else {
      std::printf("%s", (*rest)
                            ->Describe("PATCH", client.StatusPath(), patch.ToJson(),
                                       apiserver::kJsonPatchType)
                            .c_str());
    }
    if (!foreign.empty()) {
      std::printf("left alone (held by another writer): %s\n", Keys(foreign).c_str());
    }
    return kExitOk;
  }
  absl::StatusOr<apiserver::NodeClient::Applied> applied = client.Apply(plan);
  if (!applied.ok()) return Fail(kExitFailure, std::string(applied.status().message()));
  const std::set<std::string> before = apiserver::OwnedLabels(applied->before);
  const std::set<std::string> after = apiserver::OwnedLabels(applied->after);
  std::vector<std::string> removed;
  for (const std::string& k : before) {
    if (after.count(k) == 0) removed.push_back(k);
  }
  if (!applied->patched) {
    std::printf("node %s: labels already right (%zu owned by gpu-agent)\n", node.c_str(),
                after.size());
  } else if (req.verb == "apply") {
    std::printf("node %s: %zu labels kept by gpu-agent; removed: %s\n", node.c_str(), after.size(),
                Keys(removed).c_str());
  } else {
    std::printf("node %s: removed gpu-agent's labels: %s\n", node.c_str(), Keys(removed).c_str());
  }
  if (!foreign.empty()) {
    std::printf("left alone (held by another writer): %s\n", Keys(foreign).c_str());
  }
  return kExitOk;
}

}  // namespace gpu_agent
