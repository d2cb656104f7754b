#include "agent/config/config_schema.h"

#include <algorithm>
#include <optional>
#include <set>

#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

using K = SettingKind;

#define FIELD(expr) [](Config& c) -> FieldRef { return &c.expr; }

const std::vector<Setting>& Table() {
  static const std::vector<Setting>* table = new std::vector<Setting>{
      {"version", "", "", K::kEnum, {"v1"}, "config schema version", FIELD(version)},
      {"mode",
       "mode",
       "GPU_AGENT_MODE",
       K::kEnum,
       {"plugin", "static", "dra"},
       "plugin: serve the kubelet device-plugin API; static: write Node capacity; dra: serve "
       "the kubelet's Dynamic Resource Allocation plugin API (Kubernetes 1.34+)",
       FIELD(mode)},
      {"resourceName",
       "resource-name",
       "GPU_AGENT_RESOURCE_NAME",
       K::kString,
       {},
       "extended resource advertised for whole GPUs",
       FIELD(resource_name)},
      {"nodeName",
       "node-name",
       "NODE_NAME",
       K::kString,
       {},
       "this node's name (static and DRA modes; plugin mode for health.nodeEvents and nodeLabels "
       "node)",
       FIELD(node_name)},
      {"sysfsRoot",
       "sysfs-root",
       "GPU_AGENT_SYSFS_ROOT",
       K::kString,
       {},
       "where sysfs is mounted (NUMA nodes are read from it)",
       FIELD(sysfs_root)},
      {"procRoot",
       "proc-root",
       "GPU_AGENT_PROC_ROOT",
       K::kString,
       {},
       "where procfs is mounted (MIG devices' capability minors are read from it, for the CDI spec "
       "and Allocate)",
       FIELD(proc_root)},
      {"devices.include",
       "include-devices",
       "GPU_AGENT_INCLUDE_DEVICES",
       K::kStringList,
       {},
       "expose only these GPUs: uuid:, index:, pci: (device id) or name: (glob) selectors",
       FIELD(devices.include)},
      {"devices.exclude",
       "exclude-devices",
       "GPU_AGENT_EXCLUDE_DEVICES",
       K::kStringList,
       {},
       "never expose these GPUs (same selectors as devices.include)",
       FIELD(devices.exclude)},
      {"devices.max",
       "max-devices",
       "GPU_AGENT_MAX_DEVICES",
       K::kInt,
       {},
       "expose at most this many GPUs, lowest indexes first (0: no cap)",
       FIELD(devices.max)},
      {"flags.migStrategy",
       "mig-strategy",
       "MIG_STRATEGY",
       K::kEnum,
       {"none", "single", "mixed"},
       "how MIG devices are exposed",
       FIELD(flags.mig_strategy)},
      {"flags.failOnInitError",
       "fail-on-init-error",
       "FAIL_ON_INIT_ERROR",
       K::kBool,
       {},
       "exit when NVML cannot start (false: run with 0 devices)",
       FIELD(flags.fail_on_init_error)},
      {"flags.nvidiaDriverRoot",
       "nvidia-driver-root",
       "NVIDIA_DRIVER_ROOT",
       K::kString,
       {},
       "root of the NVIDIA driver installation, as the host sees it",
       FIELD(flags.nvidia_driver_root)},
      {"flags.nvidiaDevRoot",
       "dev-root",
       "NVIDIA_DEV_ROOT",
       K::kString,
       {},
       "root under which /dev/nvidia* device nodes are, as the host sees it",
       FIELD(flags.nvidia_dev_root)},
      {"flags.gdsEnabled",
       "gds-enabled",
       "GDS_ENABLED",
       K::kBool,
       {},
       "ignored: Allocate sets no NVIDIA_GDS; give the pod NVIDIA_GDS=enabled itself",
       FIELD(flags.gds_enabled)},
      {"flags.mofedEnabled",
       "mofed-enabled",
       "MOFED_ENABLED",
       K::kBool,
       {},
       "ignored: Allocate sets no NVIDIA_MOFED; give the pod NVIDIA_MOFED=enabled itself",
       FIELD(flags.mofed_enabled)},
      {"flags.plugin.passDeviceSpecs",
       "pass-device-specs",
       "PASS_DEVICE_SPECS",
       K::kBool,
       {},
       "add /dev/nvidia* device specs to Allocate responses",
       FIELD(flags.plugin.pass_device_specs)},
      {"flags.plugin.deviceListStrategy",
       "device-list-strategy",
       "DEVICE_LIST_STRATEGY",
       K::kStringList,
       {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri"},
       "how allocated devices are passed to the container runtime",
       FIELD(flags.plugin.device_list_strategy)},
      {"flags.plugin.deviceIDStrategy",
       "device-id-strategy",
       "DEVICE_ID_STRATEGY",
       K::kEnum,
       {"uuid", "index"},
       "device IDs advertised to the kubelet",
       FIELD(flags.plugin.device_id_strategy)},
      {"flags.plugin.cdiAnnotationPrefix",
       "cdi-annotation-prefix",
       "CDI_ANNOTATION_PREFIX",
       K::kString,
       {},
       "prefix of CDI annotations",
       FIELD(flags.plugin.cdi_annotation_prefix)},
      {"flags.plugin.nvidiaCTKPath",
       "nvidia-cdi-hook-path",
       "NVIDIA_CDI_HOOK_PATH",
       K::kString,
       {},
       "host path of nvidia-ctk (or nvidia-cdi-hook) for the CDI spec's hooks; where absent, "
       "the spec mounts what the hooks would link (empty: no hooks)",
       FIELD(flags.plugin.nvidia_ctk_path)},
      {"flags.plugin.containerDriverRoot",
       "container-driver-root",
       "CONTAINER_DRIVER_ROOT",
       K::kString,
       {},
       "where the host's driver root is mounted in this container (empty: at the same path)",
       FIELD(flags.plugin.container_driver_root)},
      {"flags.plugin.cdiDisableHooks",
       "cdi-disable-hooks",
       "CDI_DISABLE_HOOKS",
       K::kStringList,
       {"all", "create-symlinks", "update-ldcache", "chmod", "enable-cuda-compat",
        "disable-device-node-modification"},
       "nvidia-cdi-hook hooks the CDI spec must not call (all, or names; true means all): "
       "without create-symlinks the links are mounted as files, without update-ldcache the "
       "container's loader cache is left as the image has it; the spec never calls the others",
       FIELD(flags.plugin.cdi_disable_hooks)},
      {"flags.plugin.sharedDevicesAllocationPolicy",
       "shared-devices-allocation-policy",
       "SHARED_DEVICES_ALLOCATION_POLICY",
       K::kEnum,
       {"distributed", "packed"},
       "which time-sliced replicas to suggest: spread over GPUs, or fill one GPU first (NVIDIA's "
       "name for sharing.timeSlicing.allocationPolicy)",
       FIELD(sharing.time_slicing.allocation_policy)},
      {"flags.plugin.kubeletSocket",
       "",
       "",
       K::kString,
       {},
       "NVIDIA's file key for kubelet.socket",
       FIELD(kubelet.socket)},
      {"cdi.vendor",
       "cdi-vendor",
       "GPU_AGENT_CDI_VENDOR",
       K::kString,
       {},
       "vendor part of the CDI kind (<vendor>/<class>) of the specs, Allocate's CDI names and DRA "
       "claims' CDI devices",
       FIELD(cdi.vendor)},
      {"cdi.class",
       "cdi-class",
       "GPU_AGENT_CDI_CLASS",
       K::kString,
       {},
       "class part of the CDI kind",
       FIELD(cdi.class_name)},
      {"cdi.specDir",
       "cdi-spec-dir",
       "GPU_AGENT_CDI_SPEC_DIR",
       K::kString,
       {},
       "where CDI specs are written: plugin mode's when a cdi-* strategy is on (empty: none), DRA "
       "mode's for each prepared claim (required)",
       FIELD(cdi.spec_dir)},
      {"sharing.timeSlicing.renameByDefault",
       "",
       "",
       K::kBool,
       {},
       "advertise shared GPUs as <name>.shared",
       FIELD(sharing.time_slicing.rename_by_default)},
      {"sharing.timeSlicing.failRequestsGreaterThanOne",
       "",
       "",
       K::kBool,
       {},
       "refuse requests for more than one shared replica",
       FIELD(sharing.time_slicing.fail_requests_greater_than_one)},
      {"sharing.timeSlicing.allocationPolicy",
       "",
       "",
       K::kEnum,
       {"distributed", "packed"},
       "which replicas to suggest: spread over GPUs, or fill one GPU first",
       FIELD(sharing.time_slicing.allocation_policy)},
      {"sharing.timeSlicing.honor",
       "",
       "",
       K::kStringList,
       {"devices", "rename"},
       "resources[] fields NVIDIA's plugin ignores that gpu-agent then acts on: devices (share "
       "only those GPUs), rename (advertise under that name); unlisted ones are ignored with a "
       "warning, as NVIDIA does",
       FIELD(sharing.time_slicing.honor)},
      {"health.disabled",
       "",
       "",
       K::kBool,
       {},
       "turn off XID health checks",
       FIELD(health.disabled)},
      {"health.ignoredXids",
       "",
       "",
       K::kIntList,
       {},
       "XIDs that never mark a GPU unhealthy",
       FIELD(health.ignored_xids)},
      {"health.criticalXids",
       "",
       "",
       K::kIntList,
       {},
       "XIDs that always mark a GPU unhealthy, even if ignored above",
       FIELD(health.critical_xids)},
      {"health.resetXids",
       "",
       "",
       K::kIntList,
       {},
       "XIDs after which a GPU needs a reset: back only once NVML shows one, or on SIGUSR1",
       FIELD(health.reset_xids)},
      {"health.recoveryPeriod",
       "health-recovery-period",
       "",
       K::kDuration,
       {},
       "quiet time before an unhealthy GPU is offered again (0: never)",
       FIELD(health.recovery_period)},
      {"health.eventWaitTimeout",
       "health-event-wait-timeout",
       "",
       K::kDuration,
       {},
       "longest single wait for NVML events (10ms to 1m); backoff after failed waits stops at "
       "twice this or 1s, whichever is less, and /healthz fails when the health thread stalls "
       "4 times this plus that backoff",
       FIELD(health.event_wait_timeout)},
      {"health.pollInterval",
       "health-poll-interval",
       "",
       K::kDuration,
       {},
       "how often the polled checks (memory, thermal, NVLink, PCIe, recovery action) read every "
       "GPU (1s to 1h); health.checks.<name> sets each one's severity and threshold",
       FIELD(health.poll_interval)},
      {"health.nodeEvents",
       "health-node-events",
       "GPU_AGENT_HEALTH_NODE_EVENTS",
       K::kEnum,
       {"auto", "on", "off"},
       "a Kubernetes Event on the Node for each GPU health transition and the Node condition "
       "GpuHealthy (RBAC: events create, nodes/status patch); auto: in static mode, on; in "
       "plugin and DRA modes, off (on needs nodeName and an API connection)",
       FIELD(health.node_events)},
      {"kubelet.socket",
       "kubelet-socket",
       "KUBELET_SOCKET",
       K::kString,
       {},
       "the kubelet's registration socket; the plugin's socket goes beside it",
       FIELD(kubelet.socket)},
      {"kubelet.endpoint",
       "endpoint",
       "",
       K::kString,
       {},
       "file name of the plugin's socket (one per resource: others get a suffix)",
       FIELD(kubelet.endpoint)},
      {"kubelet.streamGracePeriod",
       "stream-grace-period",
       "",
       K::kDuration,
       {},
       "register again when the kubelet holds no ListAndWatch stream for this long",
       FIELD(kubelet.stream_grace_period)},
      {"kubelet.podResourcesSocket",
       "pod-resources-socket",
       "",
       K::kString,
       {},
       "the kubelet's PodResources socket: which GPUs running pods hold, read when the node "
       "moves between plugin and DRA mode",
       FIELD(kubelet.pod_resources_socket)},
      {"dra.driverName",
       "dra-driver-name",
       "GPU_AGENT_DRA_DRIVER_NAME",
       K::kString,
       {},
       "DRA mode: the driver name (a DNS subdomain of at most 63 characters) in ResourceSlices, "
       "DeviceClasses and the kubelet's registration",
       FIELD(dra.driver_name)},
      {"dra.registryDir",
       "dra-registry-dir",
       "",
       K::kString,
       {},
       "DRA mode: the kubelet's plugin registry folder, where <driver>-reg.sock is served",
       FIELD(dra.registry_dir)},
      {"dra.pluginDir",
       "dra-plugin-dir",
       "",
       K::kString,
       {},
       "DRA mode: the kubelet's plugins folder; the DRA service is <pluginDir>/<driver>/dra.sock",
       FIELD(dra.plugin_dir)},
      {"dra.podUid",
       "dra-pod-uid",
       "POD_UID",
       K::kString,
       {},
       "DRA mode: this pod's UID (downward API metadata.uid); the sockets are named after it "
       "(<driver>-<uid>-reg.sock, dra-<uid>.sock), so a DaemonSet's rolling update with maxSurge "
       "starts the new pod beside the old one (kubelet 1.33+); empty: one instance a node",
       FIELD(dra.pod_uid)},
      {"driver.waitTimeout",
       "driver-wait-timeout",
       "GPU_AGENT_DRIVER_WAIT_TIMEOUT",
       K::kDuration,
       {},
       "wait up to this long for the NVIDIA driver (NVML) to appear (0: do not wait)",
       FIELD(driver.wait_timeout)},
      {"static.resyncInterval",
       "resync-interval",
       "",
       K::kDuration,
       {},
       "static mode: re-read the Node about this often (randomized: half to 1.5 times)",
       FIELD(static_mode.resync_interval)},
      {"static.watchTimeout",
       "watch-timeout",
       "",
       K::kDuration,
       {},
       "every watch of the API server (static mode's Node, DRA mode's slices and Node, the "
       "per-node config's label) lasts between this and twice this (randomized)",
       FIELD(static_mode.watch_timeout)},
      {"static.allocatable",
       "allocatable",
       "",
       K::kBool,
       {},
       "static mode: write status.allocatable too",
       FIELD(static_mode.allocatable)},
      {"static.removeOnExit",
       "remove-on-exit",
       "",
       K::kBool,
       {},
       "static mode: remove the resource from the Node on exit",
       FIELD(static_mode.remove_on_exit)},
      {"nodeLabels.output",
       "node-labels",
       "GPU_AGENT_NODE_LABELS",
       K::kEnum,
       {"auto", "node", "nfd", "none"},
       "GPU labels with gpu-feature-discovery's keys: node (on the Node, static mode), nfd (a "
       "node-feature-discovery feature file), none; auto: node in static mode, none in plugin mode",
       FIELD(node_labels.output)},
      {"nodeLabels.nfdFile",
       "nfd-feature-file",
       "GPU_AGENT_NFD_FEATURE_FILE",
       K::kString,
       {},
       "nodeLabels.output nfd: the node-feature-discovery local feature file to write",
       FIELD(node_labels.nfd_file)},
      {"nodeConfig.dir",
       "node-config-dir",
       "GPU_AGENT_NODE_CONFIG_DIR",
       K::kString,
       {},
       "folder of named config files (a ConfigMap's keys); the node label nodeConfig.label "
       "picks one, reloaded when it changes (empty: off)",
       FIELD(node_config.dir)},
      {"nodeConfig.label",
       "node-config-label",
       "GPU_AGENT_NODE_CONFIG_LABEL",
       K::kString,
       {},
       "node label whose value names the config file in nodeConfig.dir",
       FIELD(node_config.label)},
      {"nodeConfig.default",
       "node-config-default",
       "GPU_AGENT_NODE_CONFIG_DEFAULT",
       K::kString,
       {},
       "config in nodeConfig.dir used while the node has no such label (empty: the --config "
       "file)",
       FIELD(node_config.default_name)},
      {"apiServer.kubeconfig",
       "kubeconfig",
       "KUBECONFIG",
       K::kString,
       {},
       "kubeconfig file(s), ':'-separated",
       FIELD(api_server.kubeconfig)},
      {"apiServer.context",
       "context",
       "",
       K::kString,
       {},
       "kubeconfig context",
       FIELD(api_server.context)},
      {"apiServer.server",
       "server",
       "",
       K::kString,
       {},
       "API server URL",
       FIELD(api_server.server)},
      {"apiServer.proxy",
       "proxy",
       "",
       K::kString,
       {},
       "kubectl proxy URL (plain HTTP)",
       FIELD(api_server.proxy)},
      {"apiServer.tokenFile",
       "token-file",
       "",
       K::kString,
       {},
       "bearer token file",
       FIELD(api_server.token_file)},
      {"apiServer.certificateAuthority",
       "certificate-authority",
       "",
       K::kString,
       {},
       "CA bundle for the API server",
       FIELD(api_server.certificate_authority)},
      {"apiServer.insecureSkipTLSVerify",
       "insecure-skip-tls-verify",
       "",
       K::kBool,
       {},
       "do not verify the API server's certificate (unsafe)",
       FIELD(api_server.insecure_skip_tls_verify)},
      {"apiServer.requestTimeout",
       "request-timeout",
       "",
       K::kDuration,
       {},
       "how long to wait for an API server answer",
       FIELD(api_server.request_timeout)},
      {"metrics.address",
       "metrics-address",
       "GPU_AGENT_METRICS_ADDRESS",
       K::kString,
       {},
       "host:port of the /metrics, /healthz and /readyz endpoint (empty: off)",
       FIELD(metrics.address)},
      {"log.level",
       "log-level",
       "GPU_AGENT_LOG_LEVEL",
       K::kEnum,
       {"debug", "info", "warning", "error"},
       "log threshold",
       FIELD(log.level)},
      {"log.format",
       "log-format",
       "GPU_AGENT_LOG_FORMAT",
       K::kEnum,
       {"text", "json"},
       "log line format",
       FIELD(log.format)},
  };
  return *table;
}

#undef FIELD

// Keys of NVIDIA's schema that configure its feature-discovery sidecar or
// features the agent does not have; accepted so their files load unchanged.
const std::set<std::string_view>& IgnoredCompat() {
  static const auto* keys = new std::set<std::string_view>{"flags.gfd",
                                                           "flags.restartOnDeviceUnhealthy",
                                                           "flags.useNodeFeatureAPI",
                                                           "flags.deviceDiscoveryStrategy",
                                                           "flags.gdrcopyEnabled",
                                                           "flags.mpsRoot",
                                                           "flags.plugin.cdiFeatureFlags",
                                                           "resources",
                                                           "imex"};
  return *keys;
}

std::string Choices(const Setting& s) {
  std::vector<std::string> out(s.choices.begin(), s.choices.end());
  return StrJoin(out, ", ");
}

absl::Status BadChoice(const Setting& s, std::string_view value) {
  std::vector<std::string> options(s.choices.begin(), s.choices.end());
  std::string msg =
      StrCat("invalid value \"", value, "\" for ", s.key, " (one of ", Choices(s), ")");
  if (std::string near = ClosestMatch(value, options); !near.empty()) {
    StrAppend(&msg, "; did you mean \"", near, "\"?");
  }
  return absl::InvalidArgumentError(msg);
}

absl::StatusOr<bool> ParseBool(std::string_view key, std::string_view v, ValueSyntax syntax) {
  if (std::optional<bool> b = ParseGoBool(v)) return *b;
  if (syntax == ValueSyntax::kYaml) {
    // YAML 1.1's words, which NVIDIA's YAML reader takes as booleans.
    for (std::string_view t : {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON"}) {
      if (v == t) return true;
    }
    for (std::string_view f : {"n", "N", "no", "No", "NO", "off", "Off", "OFF"}) {
      if (v == f) return false;
    }
    return absl::InvalidArgumentError(
        StrCat("invalid value \"", v, "\" for ", key, ": expected true or false"));
  }
  return absl::InvalidArgumentError(
      StrCat("invalid value \"", v, "\" for ", key, ": ", kGoBoolExpectation));
}

}  // namespace

const std::vector<Setting>& Settings() { return Table(); }

std::optional<bool> ParseGoBool(std::string_view v) {
  for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (v == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (v == f) return false;
  }
  return std::nullopt;
}

const std::vector<SettingAlias>& SettingAliases() {
  static const auto* aliases = new std::vector<SettingAlias>{
      {"flags.plugin.nvidiaCTKPath", "nvidia-ctk-path", "NVIDIA_CTK_PATH"},
      {"flags.plugin.containerDriverRoot", "driver-root-ctr-path", "DRIVER_ROOT_CTR_PATH"},
      {"flags.nvidiaDriverRoot", "driver-root", ""},
      {"flags.nvidiaDevRoot", "nvidia-dev-root", ""},
      // The names NVIDIA's config-manager sidecar reads.
      {"nodeConfig.dir", "", "CONFIG_FILE_SRCDIR"},
      {"nodeConfig.label", "", "NODE_LABEL"},
      {"nodeConfig.default", "", "DEFAULT_CONFIG"},
  };
  return *aliases;
}

const Setting* FindSetting(std::string_view key) {
  for (const Setting& s : Table()) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

const Setting* FindSettingByFlag(std::string_view flag) {
  for (const Setting& s : Table()) {
    if (!s.flag.empty() && s.flag == flag) return &s;
  }
  return nullptr;
}

bool IsSettingPrefix(std::string_view key) {
  const std::string prefix = StrCat(key, ".");
  if (key == "sharing.timeSlicing.resources") return false;
  for (const Setting& s : Table()) {
    if (s.key.starts_with(prefix)) return true;
  }
  return key == "sharing" || key == "sharing.timeSlicing";
}

bool IsIgnoredCompatKey(std::string_view key) { return IgnoredCompat().count(key) > 0; }

std::vector<std::string> ChildKeys(std::string_view prefix) {
  std::set<std::string> out;
  auto add = [&](std::string_view key) {
    std::string_view rest = key;
    if (!prefix.empty()) {
      const std::string p = StrCat(prefix, ".");
      if (!key.starts_with(p)) return;
      rest = key.substr(p.size());
    }
    out.insert(std::string(rest.substr(0, rest.find('.'))));
  };
  for (const Setting& s : Table()) add(s.key);
  for (std::string_view k : IgnoredCompat()) add(k);
  add("sharing.timeSlicing.resources");
  add("health.checks");
  add("dra.taints");
  add("sharing.mps");
  return {out.begin(), out.end()};
}

absl::Status ApplySetting(const Setting& s, const std::vector<std::string>& items, Config* config,
                          ValueSyntax syntax) {
  FieldRef ref = s.ref(*config);
  const bool is_list = s.kind == K::kStringList || s.kind == K::kIntList;
  if (!is_list && items.size() != 1) {
    return absl::InvalidArgumentError(StrCat(s.key, " takes one value, not a list"));
  }
  switch (s.kind) {
    case K::kString:
      *std::get<std::string*>(ref) = items[0];
      return absl::OkStatus();
    case K::kEnum:
      if (std::find(s.choices.begin(), s.choices.end(), items[0]) == s.choices.end()) {
        return BadChoice(s, items[0]);
      }
      *std::get<std::string*>(ref) = items[0];
      return absl::OkStatus();
    case K::kBool: {
      absl::StatusOr<bool> b = ParseBool(s.key, items[0], syntax);
      if (!b.ok()) return b.status();
      *std::get<bool*>(ref) = *b;
      return absl::OkStatus();
    }
    case K::kInt: {
      int n = 0;
      if (!ParseInt(StripWhitespace(items[0]), &n) || n < 0) {
        return absl::InvalidArgumentError(StrCat("invalid value \"", items[0], "\" for ", s.key,
                                                 ": expected a whole number of 0 or more"));
      }
      *std::get<int*>(ref) = n;
      return absl::OkStatus();
    }
    case K::kDuration: {
      absl::StatusOr<Duration> d = ParseDuration(items[0]);
      if (!d.ok()) return absl::InvalidArgumentError(StrCat(s.key, ": ", d.status().message()));
      *std::get<Duration*>(ref) = *d;
      return absl::OkStatus();
    }
    case K::kStringList: {
      std::vector<std::string> values;
      for (const std::string& item : items) {
        std::string v(StripWhitespace(item));
        if (v.empty()) continue;
        if (s.key == "flags.plugin.cdiDisableHooks") {
          // A boolean is taken too: true disables every hook, false none.
          if (std::optional<bool> b = ParseGoBool(v)) {
            if (!*b) continue;
            v = "all";
          }
        }
        if (!s.choices.empty() &&
            std::find(s.choices.begin(), s.choices.end(), v) == s.choices.end()) {
          return BadChoice(s, v);
        }
        if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
      }
      // A list of fixed choices must pick one; a list of selectors, of hooks
      // to leave out or of fields to honour may be empty.
      if (values.empty() && !s.choices.empty() && s.key != "flags.plugin.cdiDisableHooks" &&
          s.key != "sharing.timeSlicing.honor") {
        return absl::InvalidArgumentError(StrCat(s.key, " is empty"));
      }
      *std::get<std::vector<std::string>*>(ref) = std::move(values);
      return absl::OkStatus();
    }
    case K::kIntList: {
      std::vector<int> values;
      for (const std::string& item : items) {
        const std::string_view v = StripWhitespace(item);
        if (v.empty()) continue;
        int n = 0;
        if (!ParseInt(v, &n) || n < 0) {
          return absl::InvalidArgumentError(
              StrCat("invalid value \"", v, "\" in ", s.key, ": expected a whole number"));
        }
        if (std::find(values.begin(), values.end(), n) == values.end()) values.push_back(n);
      }
      *std::get<std::vector<int>*>(ref) = std::move(values);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled setting kind");
}

std::string FormatSetting(const Setting& s, Config& config) {
  FieldRef ref = s.ref(config);
  switch (s.kind) {
    case K::kString:
    case K::kEnum: {
      const std::string& v = *std::get<std::string*>(ref);
      return v.empty() ? "\"\"" : v;
    }
    case K::kBool:
      return *std::get<bool*>(ref) ? "true" : "false";
    case K::kInt:
      return StrCat(*std::get<int*>(ref));
    case K::kDuration:
      return FormatDuration(*std::get<Duration*>(ref));
    case K::kStringList:
      return StrCat("[", StrJoin(*std::get<std::vector<std::string>*>(ref), ", "), "]");
    case K::kIntList:
      return StrCat("[", StrJoin(*std::get<std::vector<int>*>(ref), ", "), "]");
  }
  return "";
}

}  // namespace gpu_agent
