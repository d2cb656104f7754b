// The agent's effective configuration: NVIDIA device-plugin compatible keys
// (`version: v1`, `flags:`, `sharing:`) plus the agent's own. Plain data;
// config_loader.h fills it from defaults, file, env and flags.
#ifndef GPU_AGENT_AGENT_CONFIG_CONFIG_H_
#define GPU_AGENT_AGENT_CONFIG_CONFIG_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/duration.h"
#include "base/file_util.h"
#include "health/health_check_catalog.h"

namespace gpu_agent {

// The settings that pick between behaviours, as the code branches on them.
// The schema (config_schema.h) admits only their names; each is read in one
// place below, so no other code compares the strings.
enum class AgentMode { kPlugin, kStatic, kDra };
enum class MigStrategy { kNone, kSingle, kMixed };
enum class DeviceIdStrategy { kUuid, kIndex };
enum class LabelOutput { kNone, kNode, kNfd };

// Bounds on time-slicing. Every replica is a device the kubelet keeps in
// memory, in its checkpoint and in each ListAndWatch answer, which its gRPC
// client takes up to 4 MiB of (about 60,000 devices of ~70 bytes): past
// that the stream fails and the plugin is registered again and again.
// 1,024 replicas a GPU is far past any sharing that is still useful (CUDA
// MPS itself stops at 48 clients); 16,384 devices a resource keeps the
// answer near 1 MiB, a quarter of the kubelet's limit.
inline constexpr int kMaxTimeSlicingReplicas = 1024;
inline constexpr size_t kMaxDevicesPerResource = 16384;

struct TimeSlicingResource {
  std::string name;  // resource the replicas apply to, e.g. nvidia.com/gpu
  int replicas = 0;
  std::string rename;  // optional: advertise under this name instead
  // Which units (GPUs, or MIG devices for a MIG resource) are shared:
  // {"all"} (default), or indexes/UUIDs (GPU index or UUID; MIG UUID or
  // "<gpu>:<mig>"). `devices: N` in YAML sets device_count instead: the
  // first N units.
  std::vector<std::string> devices;
  int device_count = 0;
};

struct Config {
  std::string version = "v1";
  std::string mode = "plugin";  // plugin | static | dra
  AgentMode agent_mode() const {
    return mode == "static" ? AgentMode::kStatic
           : mode == "dra"  ? AgentMode::kDra
                            : AgentMode::kPlugin;
  }
  std::string resource_name = "nvidia.com/gpu";
  std::string node_name;
  std::string sysfs_root = "/sys";
  std::string proc_root =
      "/proc";  // MIG capability minors: <procRoot>/driver/nvidia-caps/mig-minors

  // Which GPUs are exposed (both modes). Selectors: "uuid:GPU-...",
  // "index:3", "pci:0x20b2" (PCI device id), "name:*A100*" (product name
  // glob); bare "GPU-..." and bare numbers mean a UUID and an index.
  struct DeviceSelection {
    std::vector<std::string> include;  // empty: every GPU
    std::vector<std::string> exclude;
    int max = 0;  // expose at most this many (lowest indexes first); 0: no cap
  } devices;

  struct Flags {
    std::string mig_strategy = "none";  // none | single | mixed
    MigStrategy mig() const {
      return mig_strategy == "single"  ? MigStrategy::kSingle
             : mig_strategy == "mixed" ? MigStrategy::kMixed
                                       : MigStrategy::kNone;
    }
    bool fail_on_init_error = true;
    // As NVIDIA's plugin means them: the driver root and the root of the
    // /dev/nvidia* nodes as the HOST sees them ("/", or the GPU operator's
    // "/run/nvidia/driver"). Device specs and CDI name host paths from them.
    std::string nvidia_driver_root = "/";
    std::string nvidia_dev_root = "/";
    bool gds_enabled = false;
    bool mofed_enabled = false;
    struct Plugin {
      bool pass_device_specs = false;
      std::vector<std::string> device_list_strategy = {"envvar"};
      std::string device_id_strategy = "uuid";  // uuid | index
      DeviceIdStrategy id_strategy() const {
        return device_id_strategy == "index" ? DeviceIdStrategy::kIndex : DeviceIdStrategy::kUuid;
      }
      std::string cdi_annotation_prefix = "cdi.k8s.io/";
      std::string nvidia_ctk_path = "/usr/bin/nvidia-ctk";
      // Where the host's driver root is mounted in the agent's container.
      // Unset, the loader takes NVIDIA's chart layout, /driver-root, when
      // that folder exists (config_loader.h). Empty: at the same path (a host
      // process, or a runtime that injects the driver).
      std::string container_driver_root;
      // Hooks of nvidia-cdi-hook the CDI spec must not call ("all", or hook
      // names). gpu-agent's spec calls only create-symlinks (then mounts the
      // links instead) and update-ldcache (then leaves the cache alone).
      std::vector<std::string> cdi_disable_hooks;
    } plugin;

    // Where this process finds the driver root: NVML is loaded from here.
    const std::string& DriverRootHere() const {
      return plugin.container_driver_root.empty() ? nvidia_driver_root
                                                  : plugin.container_driver_root;
    }
    // Where this process finds the device nodes: inside the mounted driver
    // root when the dev root is the driver root, else at the dev root's own
    // path (host /dev mounted at /dev, say).
    const std::string& DevRootHere() const {
      return SameRoot(nvidia_dev_root, nvidia_driver_root) ? DriverRootHere() : nvidia_dev_root;
    }
  } flags;

  struct Sharing {
    struct TimeSlicing {
      bool rename_by_default = false;
      bool fail_requests_greater_than_one = false;
      // Which replicas GetPreferredAllocation suggests: "distributed" spreads
      // containers over GPUs, "packed" fills one GPU before the next.
      std::string allocation_policy = "distributed";
      // NVIDIA's plugin (v0.20) reads resources[].devices and .rename and
      // ignores them; gpu-agent does too unless they are named here
      // ("devices", "rename"), so a file keeps NVIDIA's meaning by default.
      std::vector<std::string> honor;
      std::vector<TimeSlicingResource> resources;
    } time_slicing;
  } sharing;

  // The CDI spec plugin mode writes when a cdi-* device-list strategy is
  // on, naming devices "<vendor>/<class>=<id>" as Allocate does.
  struct Cdi {
    std::string vendor = "gpu-agent.github.io";
    std::string class_name = "gpu";
    std::string spec_dir = "/var/run/cdi";  // empty: write none (another tool does)
    std::string Kind() const { return vendor + "/" + class_name; }
  } cdi;

  struct Health {
    bool disabled = false;
    // XIDs that never mark a GPU unhealthy (application errors).
    std::vector<int> ignored_xids = {13, 31, 43, 45, 68, 109};
    // XIDs that always do, even when listed above (DP_ENABLE_HEALTHCHECKS).
    std::vector<int> critical_xids;
    // Back only with NVML's evidence of a reset, or SIGUSR1 (see
    // health::HealthPolicy::reset_xids for where the list comes from).
    std::vector<int> reset_xids = {48, 63, 64, 74, 79, 92, 95, 119, 120, 154};
    // A GPU marked unhealthy comes back after this long with no critical XID
    // and NVML answering for it. 0 keeps it out until restart.
    Duration recovery_period = std::chrono::seconds(60);
    // Longest single NVML event wait; the backoff cap is twice this, and
    // /healthz's heartbeat bound 6 times this (4 waits plus the cap).
    Duration event_wait_timeout = std::chrono::seconds(5);
    // How often the polled checks (memory, thermal, NVLink, PCIe, recovery
    // action) read every GPU.
    Duration poll_interval = std::chrono::seconds(30);
    // health.checks.<name>: {severity, threshold}; the catalog's defaults.
    health::CheckSettings checks = health::CheckSettings::Defaults();
    // Events on the Node and its GpuHealthy condition: auto (static mode
    // yes, plugin mode no: it has no API connection unless given one), on,
    // off.
    std::string node_events = "auto";
  } health;

  struct Kubelet {
    std::string socket = "/var/lib/kubelet/device-plugins/kubelet.sock";
    std::string endpoint = "nvidia-gpu.sock";
    // A registered resource the kubelet holds no ListAndWatch stream for
    // this long (kubelet.sock present) is served afresh and registered again.
    Duration stream_grace_period = std::chrono::seconds(1);
    // The kubelet's PodResources API (v1 List): which GPUs running pods
    // hold, read when the node moves between the device plugin and DRA.
    std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  } kubelet;

  // DRA mode: the kubelet's Dynamic Resource Allocation plugin API.
  struct Dra {
    std::string driver_name = "gpu.gpu-agent.github.io";  // a DNS subdomain
    // The kubelet's plugin-watcher folder: <registryDir>/<driver>-reg.sock.
    std::string registry_dir = "/var/lib/kubelet/plugins_registry";
    // The plugin's own folder: <pluginDir>/<driver>/dra.sock.
    std::string plugin_dir = "/var/lib/kubelet/plugins";
    // This pod's UID (the downward API's metadata.uid): its sockets are
    // named after it, so in a rolling update the new pod registers beside
    // the old one (kubelet 1.33+). Empty: the plain names.
    std::string pod_uid;
    // The taint effect of each cause of an unhealthy or degraded device,
    // as set: "lost", "xid" or a health check's name -> "None",
    // "NoSchedule", "NoExecute" or "off". What is not set takes the
    // default (DraTaintEffect).
    std::map<std::string, std::string> taints;
  } dra;

  struct Driver {
    // Before the driver is there (a driver container still installing it),
    // retry loading NVML for up to this long; then failOnInitError decides.
    // 0: do not wait.
    Duration wait_timeout = Duration::zero();
  } driver;

  struct Static {
    // The watch reports every change; the re-read is rare insurance.
    Duration resync_interval = std::chrono::minutes(30);
    Duration watch_timeout = std::chrono::minutes(10);
    bool allocatable = true;
    bool remove_on_exit = false;
  } static_mode;

  // GPU labels with gpu-feature-discovery's keys (agent/labels/gpu_labels.h).
  struct NodeLabels {
    // auto: node in static mode, none in plugin mode. node: on the Node
    // through the API server (static mode only); nfd: a
    // node-feature-discovery local feature file; none: no labels (the
    // agent's own earlier ones are removed).
    std::string output = "auto";
    std::string nfd_file = "/etc/kubernetes/node-feature-discovery/features.d/gpu-agent";
    // The output after `auto` is resolved for the agent's mode.
    LabelOutput Effective(AgentMode agent_mode) const {
      if (output == "node") return LabelOutput::kNode;
      if (output == "nfd") return LabelOutput::kNfd;
      if (output == "none") return LabelOutput::kNone;
      return agent_mode == AgentMode::kStatic ? LabelOutput::kNode : LabelOutput::kNone;
    }
  } node_labels;

  // One of several named configs per node, chosen by a node label, as
  // NVIDIA's config-manager does (agent/config/node_config.h). Off while dir is
  // empty. Read at start; a reload keeps the values the agent started with.
  struct NodeConfig {
    std::string dir;  // folder of named config files (a ConfigMap's keys)
    std::string label = "nvidia.com/device-plugin.config";
    std::string default_name;  // used when the label is absent; empty: the --config file
  } node_config;

  struct ApiServer {
    std::string kubeconfig;
    std::string context;
    std::string server;
    std::string proxy;
    std::string token_file;
    std::string certificate_authority;
    bool insecure_skip_tls_verify = false;
    Duration request_timeout = std::chrono::seconds(30);
  } api_server;

  struct Metrics {
    std::string address;  // host:port; empty: off
  } metrics;

  struct Log {
    std::string level = "info";
    std::string format = "text";
  } log;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CONFIG_CONFIG_H_
