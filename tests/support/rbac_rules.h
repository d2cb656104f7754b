// What a ClusterRole of a manifest grants, as the API server stand-in's
// calls() names requests ("get nodes", "patch nodes/status"), so a test can
// compare the calls the agent made with the rules it ships.
#ifndef GPU_AGENT_TESTS_SUPPORT_RBAC_RULES_H_
#define GPU_AGENT_TESTS_SUPPORT_RBAC_RULES_H_

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "support/test_support.h"

namespace gpu_agent::testing {

// "verb resource" for each rule of each ClusterRole in `path` (under the
// source tree, e.g. "manifests/components/node-config/rbac.yaml").
inline std::set<std::string> GrantedCalls(const std::string& path) {
  std::set<std::string> granted;
  for (const YAML::Node& d : YAML::LoadAll(ReadFile(SourceDir() + "/" + path))) {
    if (d["kind"].as<std::string>() != "ClusterRole") continue;
    for (const YAML::Node& rule : d["rules"]) {
      for (const YAML::Node& res : rule["resources"]) {
        for (const YAML::Node& verb : rule["verbs"]) {
          granted.insert(verb.as<std::string>() + " " + res.as<std::string>());
        }
      }
    }
  }
  return granted;
}

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_RBAC_RULES_H_
