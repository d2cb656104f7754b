// Invariants of manifests/: every file parses; the static-mode ClusterRole
// allows exactly the calls the agent makes; every config in the ConfigMap
// equals its file in config/ and passes `gpu-agent config`; kustomize renders.
#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "api_server_stub.h"
#include "support/test_support.h"

namespace gpu_agent::testing {
namespace {

std::string Manifests() { return SourceDir() + "/manifests"; }

std::vector<YAML::Node> Docs(const std::string& file) {
  return YAML::LoadAll(ReadFile(Manifests() + "/" + file));
}

TEST(ManifestsTest, EveryManifestParses) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(Manifests())) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    std::vector<YAML::Node> docs;
    ASSERT_NO_THROW(docs = YAML::LoadAll(ReadFile(entry.path().string()))) << entry.path();
    for (const YAML::Node& d : docs) {
      EXPECT_TRUE(d["apiVersion"] && d["kind"]) << entry.path();
    }
  }
  EXPECT_GE(files, 5);
}

TEST(ManifestsTest, ClusterRoleAllowsExactlyTheCallsTheAgentMakes) {
  std::set<std::string> granted;
  for (const YAML::Node& d : Docs("static-rbac.yaml")) {
    if (d["kind"].as<std::string>() != "ClusterRole") continue;
    for (const YAML::Node& rule : d["rules"]) {
      for (const YAML::Node& group : rule["apiGroups"]) EXPECT_EQ(group.as<std::string>(), "");
      for (const YAML::Node& res : rule["resources"]) {
        for (const YAML::Node& verb : rule["verbs"]) {
          granted.insert(verb.as<std::string>() + " " + res.as<std::string>());
        }
      }
    }
  }
  // What the agent really asks: static mode through a reconcile, a drift
  // repair, a removal on exit; and the capacity subcommand.
  ApiServerStub api;
  api.AddNode("n1");
  auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  env["KUBERNETES_SERVICE_HOST"] = "<unset>";
  Subprocess agent({BinaryPath(), "run", "--mode", "static", "--node-name", "n1",
                    "--proxy=" + api.url(), "--remove-on-exit"},
                   env);
  ASSERT_TRUE(WaitFor([&] { return api.Capacity("n1", "nvidia.com/gpu") == "1"; }))
      << agent.Stderr();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() > 0; }));
  api.KubeletSetsCapacity("n1", "nvidia.com/gpu", "0");
  ASSERT_TRUE(WaitFor([&] { return api.Capacity("n1", "nvidia.com/gpu") == "1"; }));
  agent.Signal(SIGTERM);
  ASSERT_EQ(agent.Wait(), 0);
  RunResult cli = RunAgent({"capacity", "get", "--proxy=" + api.url(), "--node", "n1"}, env);
  ASSERT_EQ(cli.code, 0) << cli.err;
  const std::set<std::string> used = api.calls();
  EXPECT_EQ(used, granted) << "the ClusterRole must allow what the agent does, and nothing more";
}

TEST(ManifestsTest, ConfigMapHoldsTheExampleConfigsAndTheyLoad) {
  const std::vector<YAML::Node> docs = Docs("configmap.yaml");
  ASSERT_EQ(docs.size(), 1u);
  int checked = 0;
  for (const auto& kv : docs[0]["data"]) {
    const std::string name = kv.first.as<std::string>();
    const std::string text = kv.second.as<std::string>();
    EXPECT_EQ(text, ReadFile(SourceDir() + "/config/" + name))
        << name << " in the ConfigMap differs from config/" << name;
    TempDir dir;
    RunResult r =
        RunAgent({"config", "--config", dir.Write(name, text)}, {{"CONFIG_FILE", "<unset>"}});
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(ManifestsTest, KustomizeRenders) {
  if (std::system("command -v kubectl >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no kubectl on this machine";
  }
  TempDir dir;
  const int rc = std::system(
      ("kubectl kustomize " + Manifests() + " > " + dir.Join("out.yaml") + " 2>&1").c_str());
  ASSERT_EQ(rc, 0) << ReadFile(dir.Join("out.yaml"));
  std::set<std::string> kinds;
  for (const YAML::Node& d : YAML::LoadAll(ReadFile(dir.Join("out.yaml")))) {
    kinds.insert(d["kind"].as<std::string>());
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"ConfigMap", "DaemonSet", "ServiceAccount", "ClusterRole",
                                          "ClusterRoleBinding"}));
}

}  // namespace
}  // namespace gpu_agent::testing
