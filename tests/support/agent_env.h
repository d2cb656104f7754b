// The environment a test gives the gpu-agent binary it starts: the test
// process's own, less every variable the agent reads, plus what the test
// sets. So a CONFIG_FILE or NODE_NAME in the shell that runs the tests, or a
// KUBERNETES_SERVICE_HOST inside a pod, cannot change what a test sees.
//
// Separate from test_support.h because the list comes from the settings
// table: this links gpu_agent_config, which the unit tier must not need.
#ifndef GPU_AGENT_TESTS_SUPPORT_AGENT_ENV_H_
#define GPU_AGENT_TESTS_SUPPORT_AGENT_ENV_H_

#include <chrono>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace gpu_agent::testing {

// Every environment variable the agent reads: the settings table's env names
// and their second names, NVIDIA's flags it accepts and ignores, and the few
// read outside the table (CONFIG_FILE, DP_DISABLE_HEALTHCHECKS,
// DP_ENABLE_HEALTHCHECKS, KUBERNETES_SERVICE_HOST and _PORT,
// GPU_AGENT_SERVICE_ACCOUNT_DIR). HOME (read only to find ~/.kube/config)
// is left to the tests that care: other children need it.
std::vector<std::string> AgentEnvNames();

// Overrides (for Subprocess) that remove each of AgentEnvNames() and then
// apply `overrides`, which win (kUnset still removes).
EnvOverrides AgentEnv(const EnvOverrides& overrides = {});

// AgentEnv plus what makes the agent load the NVML stand-in with `fixture`.
EnvOverrides FakeNvmlEnv(const std::string& fixture);

// `gpu-agent run --mode dra` on node `node` through `proxy_url`, with its
// folders under `dir` (registry, plugins, cdi, driver, devroot) and no CDI
// hook: the command line the DRA benchmarks start; add flags after it.
std::vector<std::string> DraAgentArgs(const TempDir& dir, const std::string& node,
                                      const std::string& proxy_url);

// Runs `gpu-agent args...` under AgentEnv(env) to completion.
struct RunResult {
  int code;
  std::string out;
  std::string err;
};
RunResult RunAgent(std::vector<std::string> args, const EnvOverrides& env = {},
                   std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_AGENT_ENV_H_
