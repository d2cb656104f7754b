// One config per node, chosen by a node label (nodeConfig.* settings), as
// NVIDIA's config-manager sidecar does it, without the sidecar: a folder of
// named config files (a ConfigMap with several keys, mounted as a folder),
// the label's value naming one, a default name for a node without the label.
// The named file takes the place of the --config file; env and flags still
// apply over it. A watch of the Node (static mode's own, or a light one in
// plugin mode) hands every label value seen to Observe, which says when it
// changed; the watch's owner then asks for the reload SIGHUP asks for, through
// the same code.
#ifndef GPU_AGENT_AGENT_CONFIG_NODE_CONFIG_H_
#define GPU_AGENT_AGENT_CONFIG_NODE_CONFIG_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/config_loader.h"
#include "base/prom_text.h"

namespace gpu_agent {

// The nodeConfig.* rules that need no filesystem: the label key and the
// default name well formed, a node name when the folder is set. Errors start
// with the setting's key.
absl::Status ValidateNodeConfigSettings(const Config& config);

// OK when `name` can name a config: what a label value may hold (at most 63
// characters of [A-Za-z0-9._-], starting and ending alphanumeric).
absl::Status ValidateConfigName(const std::string& name);

// The file in `dir` that config `name` is: <dir>/<name>, else
// <dir>/<name>.yaml. NotFound names the folder and the configs it holds.
absl::StatusOr<std::string> FindNamedConfig(const std::string& dir, const std::string& name);

// The config names a folder holds (file names, without a .yaml suffix;
// hidden entries, such as a ConfigMap volume's ..data, left out).
std::vector<std::string> NamedConfigs(const std::string& dir);

// Thread-safe: Observe is called from a watch thread, the rest from main.
class NodeConfigSelector {
 public:
  // `settings`: the nodeConfig.* the agent started with (dir set). Checks
  // that the folder is there and that it holds the default; errors name the
  // setting and where its value came from.
  static absl::StatusOr<std::unique_ptr<NodeConfigSelector>> Create(const LoadedConfig& started);

  // The label value before any watch runs (a GET of the Node at start);
  // nullopt when the Node has no such label.
  void SetInitialLabel(std::optional<std::string> value);

  // Loads the base request (the --config file, env, flags), then the named
  // config the label (or default) chooses. A missing or broken named config
  // is logged (label value, folder, error) and counted; then at start the
  // default, or else the base config, is used, and on a reload an error is
  // returned so the running config stays.
  absl::StatusOr<LoadedConfig> Load(const ConfigRequest& request, bool at_start);

  // A label value seen on the Node (nullopt: no such label). True, after
  // logging the change, when the config must be reloaded: the value changed
  // from the last one seen, or, before any was known, it names another config
  // than the one in use.
  [[nodiscard]] bool Observe(const std::optional<std::string>& value);

  const Config::NodeConfig& settings() const { return settings_; }
  // gpu_agent_node_config_* families.
  void RenderMetrics(PromText* p) const;

 private:
  explicit NodeConfigSelector(Config::NodeConfig settings) : settings_(std::move(settings)) {}
  // The name the label value (or its absence) chooses; empty: the base.
  std::string NameFor(const std::optional<std::string>& value) const;
  absl::StatusOr<LoadedConfig> LoadNamed(const ConfigRequest& request, const LoadedConfig& base,
                                         const std::string& name, const std::string& source);

  const Config::NodeConfig settings_;
  mutable std::mutex mu_;
  bool label_known_ = false;            // protected by mu_
  std::optional<std::string> label_;    // protected by mu_: the last value seen
  std::string in_use_;                  // protected by mu_: config name in use; empty: base
  std::string in_use_source_ = "none";  // protected by mu_: label, default or config
  uint64_t errors_ = 0;                 // protected by mu_
  uint64_t label_reloads_ = 0;          // protected by mu_
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_NODE_CONFIG_H_
