#include "support/agent_env.h"

#include <set>
#include <utility>

#include "agent/config/config_schema.h"
#include "agent/config/nvidia_compat.h"

namespace gpu_agent::testing {

std::vector<std::string> AgentEnvNames() {
  std::set<std::string> names = {"CONFIG_FILE",
                                 "DP_DISABLE_HEALTHCHECKS",
                                 "DP_ENABLE_HEALTHCHECKS",
                                 "KUBERNETES_SERVICE_HOST",
                                 "KUBERNETES_SERVICE_PORT",
                                 "GPU_AGENT_SERVICE_ACCOUNT_DIR"};
  for (const Setting& s : Settings()) {
    if (!s.env.empty()) names.emplace(s.env);
  }
  for (const SettingAlias& a : SettingAliases()) {
    if (!a.env.empty()) names.emplace(a.env);
  }
  for (const IgnoredNvidiaFlag& f : IgnoredNvidiaFlags()) {
    if (!f.env.empty()) names.emplace(f.env);
  }
  return {names.begin(), names.end()};
}

EnvOverrides AgentEnv(const EnvOverrides& overrides) {
  EnvOverrides env;
  for (std::string& name : AgentEnvNames()) env.emplace(std::move(name), kUnset);
  for (const auto& [k, v] : overrides) env[k] = v;
  return env;
}

EnvOverrides FakeNvmlEnv(const std::string& fixture) {
  return AgentEnv({{"LD_LIBRARY_PATH", FakeNvmlDir()},
                   {"FAKE_NVML_FIXTURE", fixture},
                   // Not the host's /sys: what the agent reads there (NUMA
                   // nodes, PCI classes, the DMI product name) would make
                   // results depend on the machine the tests run on. Tests
                   // that want sysfs write a tree (WriteFixtureSysfs) and pass
                   // --sysfs-root.
                   {"GPU_AGENT_SYSFS_ROOT", FakeNvmlDir() + "/no-sysfs"}});
}

RunResult RunAgent(std::vector<std::string> args, const EnvOverrides& env,
                   std::chrono::milliseconds timeout) {
  args.insert(args.begin(), BinaryPath());
  Subprocess p(args, AgentEnv(env));
  const int code = p.Wait(timeout);
  return {code, p.Stdout(), p.Stderr()};
}

std::vector<std::string> DraAgentArgs(const TempDir& dir, const std::string& node,
                                      const std::string& proxy_url) {
  return {BinaryPath(),
          "run",
          "--mode",
          "dra",
          "--node-name",
          node,
          "--proxy=" + proxy_url,
          "--dra-registry-dir",
          dir.Join("registry"),
          "--dra-plugin-dir",
          dir.Join("plugins"),
          "--cdi-spec-dir",
          dir.Join("cdi"),
          "--nvidia-cdi-hook-path",
          "",
          "--nvidia-driver-root",
          dir.Join("driver"),
          "--dev-root",
          dir.Join("devroot")};
}

}  // namespace gpu_agent::testing
