// The per-node config: settings checks, finding a named config in the
// folder, and what Load chooses for a label value (or none), including a
// missing or broken named config.
#include "agent/config/node_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "support/test_support.h"

namespace gpu_agent {
namespace {

using gpu_agent::testing::TempDir;
using ::testing::HasSubstr;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

class NodeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("configs/a100-80gb", "version: v1\nflags:\n  migStrategy: single\n");
    dir_.Write("configs/t4.yaml", "version: v1\nflags:\n  migStrategy: mixed\n");
    dir_.Write("configs/broken", "version: v1\nflags:\n  migStrategy: [oops\n");
    dir_.Write("configs/..data/ignored", "x");
    base_file_ = dir_.Write("base.yaml", "version: v1\nresourceName: example.com/gpu\n");
  }
  ConfigRequest Request(std::map<std::string, std::string> env) {
    ConfigRequest r;
    r.file = base_file_;
    r.file_origin = "flag --config";
    env.emplace("NODE_NAME", "node-1");
    r.env = Env(std::move(env));
    return r;
  }
  // Start-time settings: the folder and, when given, a default.
  std::unique_ptr<NodeConfigSelector> Selector(const std::string& default_name = "") {
    std::map<std::string, std::string> env = {{"GPU_AGENT_NODE_CONFIG_DIR", Dir()}};
    if (!default_name.empty()) env["GPU_AGENT_NODE_CONFIG_DEFAULT"] = default_name;
    request_ = Request(env);
    absl::StatusOr<LoadedConfig> started = LoadConfig(request_);
    EXPECT_TRUE(started.ok()) << started.status();
    absl::StatusOr<std::unique_ptr<NodeConfigSelector>> s = NodeConfigSelector::Create(*started);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::string Dir() const { return dir_.Join("configs"); }

  TempDir dir_;
  std::string base_file_;
  ConfigRequest request_;
};

TEST_F(NodeConfigTest, NamesAreFileNamesWithOrWithoutYaml) {
  EXPECT_EQ(*FindNamedConfig(Dir(), "a100-80gb"), Dir() + "/a100-80gb");
  EXPECT_EQ(*FindNamedConfig(Dir(), "t4"), Dir() + "/t4.yaml");
  EXPECT_EQ(*FindNamedConfig(Dir(), "t4.yaml"), Dir() + "/t4.yaml");
  EXPECT_THAT(NamedConfigs(Dir()), ::testing::ElementsAre("a100-80gb", "broken", "t4"));
  absl::StatusOr<std::string> missing = FindNamedConfig(Dir(), "h100");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no config named \"h100\""));
  EXPECT_THAT(missing.status().message(), HasSubstr("it holds a100-80gb, broken, t4"));
  // A label value can hold no path: nothing outside the folder is reachable.
  EXPECT_FALSE(FindNamedConfig(Dir(), "../base.yaml").ok());
  EXPECT_FALSE(FindNamedConfig(Dir(), "..data").ok());
}

TEST_F(NodeConfigTest, BadSettingsAreNamed) {
  struct Case {
    std::map<std::string, std::string> env;
    std::string error;
  } cases[] = {
      {{{"GPU_AGENT_NODE_CONFIG_LABEL", "not a key"}}, "nodeConfig.label: \"not a key\""},
      {{{"GPU_AGENT_NODE_CONFIG_LABEL", "UPPER.example/x"}}, "is not a label key"},
      {{{"GPU_AGENT_NODE_CONFIG_DEFAULT", "../etc/passwd"}}, "nodeConfig.default"},
      {{{"DEFAULT_CONFIG", "-bad"}}, "env DEFAULT_CONFIG: nodeConfig.default"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LoadedConfig> r = LoadConfig(Request(c.env));
    ASSERT_FALSE(r.ok()) << c.error;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error));
  }
  ConfigRequest no_node = Request({{"GPU_AGENT_NODE_CONFIG_DIR", Dir()}});
  no_node.env = Env({{"GPU_AGENT_NODE_CONFIG_DIR", Dir()}});
  absl::StatusOr<LoadedConfig> r = LoadConfig(no_node);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nodeConfig.dir: a config chosen by a node label"));
}

TEST_F(NodeConfigTest, MissingFolderAndUnknownDefaultStopTheStart) {
  absl::StatusOr<LoadedConfig> started =
      LoadConfig(Request({{"CONFIG_FILE_SRCDIR", dir_.Join("nope")}}));
  ASSERT_TRUE(started.ok()) << started.status();
  absl::StatusOr<std::unique_ptr<NodeConfigSelector>> s = NodeConfigSelector::Create(*started);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("env CONFIG_FILE_SRCDIR: nodeConfig.dir: \""));
  EXPECT_THAT(s.status().message(), HasSubstr("is not a folder"));

  started = LoadConfig(
      Request({{"GPU_AGENT_NODE_CONFIG_DIR", Dir()}, {"GPU_AGENT_NODE_CONFIG_DEFAULT", "h100"}}));
  ASSERT_TRUE(started.ok()) << started.status();
  s = NodeConfigSelector::Create(*started);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("env GPU_AGENT_NODE_CONFIG_DEFAULT: nodeConfig.default: no config named "
                        "\"h100\""));
}

TEST_F(NodeConfigTest, TheLabelChoosesTheFileAndEnvStillApplies) {
  auto s = Selector("t4");
  ASSERT_NE(s, nullptr);
  s->SetInitialLabel("a100-80gb");
  absl::StatusOr<LoadedConfig> c = s->Load(request_, /*at_start=*/true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.flags.mig_strategy, "single");
  EXPECT_EQ(c->config.resource_name, "nvidia.com/gpu") << "the named file replaces --config";
  EXPECT_EQ(c->config.node_name, "node-1") << "env applies over the named file";
  EXPECT_EQ(c->config.node_config.dir, Dir());
  PromText p;
  s->RenderMetrics(&p);
  EXPECT_THAT(p.str(),
              HasSubstr("gpu_agent_node_config_info{name=\"a100-80gb\",source=\"label\"} 1"));
}

TEST_F(NodeConfigTest, NoLabelMeansTheDefaultAndNoDefaultMeansTheConfigFile) {
  auto with_default = Selector("t4");
  with_default->SetInitialLabel(std::nullopt);
  absl::StatusOr<LoadedConfig> c = with_default->Load(request_, true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.flags.mig_strategy, "mixed");

  auto without = Selector();
  without->SetInitialLabel("");  // an empty value is no choice
  c = without->Load(request_, true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.resource_name, "example.com/gpu");
  PromText p;
  without->RenderMetrics(&p);
  EXPECT_THAT(p.str(), HasSubstr("gpu_agent_node_config_info{name=\"\",source=\"config\"} 1"));
}

TEST_F(NodeConfigTest, MissingOrBrokenNamedConfigFailsAReloadAndFallsBackAtStart) {
  auto s = Selector("t4");
  for (const char* name : {"h100", "broken"}) {
    s->SetInitialLabel(name);
    absl::StatusOr<LoadedConfig> reload = s->Load(request_, /*at_start=*/false);
    ASSERT_FALSE(reload.ok()) << name;
    EXPECT_THAT(reload.status().message(),
                HasSubstr(std::string(name) == "broken" ? "/broken:" : "no config named"));
    absl::StatusOr<LoadedConfig> start = s->Load(request_, /*at_start=*/true);
    ASSERT_TRUE(start.ok()) << start.status();
    EXPECT_EQ(start->config.flags.mig_strategy, "mixed") << "the default";
  }
  PromText p;
  s->RenderMetrics(&p);
  EXPECT_THAT(p.str(), HasSubstr("gpu_agent_node_config_errors_total 4"));
}

}  // namespace
}  // namespace gpu_agent
