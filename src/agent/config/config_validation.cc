// The rules across settings that parsing one setting cannot check.
#include "agent/config/config_validation.h"

#include <cctype>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "agent/config/device_selection.h"
#include "agent/config/node_config.h"
#include "base/listen_address.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "base/text.h"
#include "cdi/spec.h"

namespace gpu_agent {
namespace {

// A socket name the kubelet joins to its folder: letters, digits, '.', '_'
// and '-' only (no '/', no control character, no leading '.'), short enough
// for a unix socket's path once joined.
absl::Status ValidateSocketFileName(std::string_view name) {
  constexpr size_t kMax = 64;
  if (name.empty() || name.size() > kMax || name.front() == '.') {
    return absl::InvalidArgumentError(
        StrCat("must be a bare socket file name of 1 to ", kMax,
               " characters, not starting with '.' (the kubelet joins it to its own folder)"));
  }
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          "must be a bare socket file name of letters, digits, '.', '_' and '-' (the kubelet "
          "joins it to its own folder)");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSharedDevices(const std::vector<std::string>& devices,
                                   const std::string& where) {
  std::set<std::string> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string& d = devices[i];
    if (d.empty()) return absl::InvalidArgumentError(StrCat(where, ".devices[", i, "] is empty"));
    if (d == "all" && devices.size() > 1) {
      return absl::InvalidArgumentError(
          StrCat(where, ".devices: \"all\" cannot be listed with other devices"));
    }
    if (!seen.insert(AsciiToLower(d)).second) {
      return absl::InvalidArgumentError(StrCat(where, ".devices: \"", d, "\" is listed twice"));
    }
  }
  return absl::OkStatus();
}

// resourceName and nodeName.
absl::Status ValidateNames(const Config& c) {
  if (absl::Status s = ValidateExtendedResourceName(c.resource_name); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("resourceName: ", s.message()));
  }
  if (!c.node_name.empty()) {
    if (absl::Status s = ValidateNodeName(c.node_name); !s.ok()) {
      return absl::InvalidArgumentError(StrCat("nodeName: ", s.message()));
    }
  }
  return absl::OkStatus();
}

// sharing.timeSlicing.resources: each a resource this agent advertises, once, shared 2 to
// kMaxTimeSlicingReplicas ways.
absl::Status ValidateTimeSlicing(const Config& c) {
  std::set<std::string> names;
  for (size_t i = 0; i < c.sharing.time_slicing.resources.size(); ++i) {
    const TimeSlicingResource& r = c.sharing.time_slicing.resources[i];
    const std::string where = StrCat("sharing.timeSlicing.resources[", i, "]");
    if (absl::Status s = ValidateExtendedResourceName(r.name); !s.ok()) {
      return absl::InvalidArgumentError(StrCat(where, ".name: ", s.message()));
    }
    const bool mig_resource = r.name.starts_with(kMigResourcePrefix);
    if (mig_resource && c.flags.mig() != MigStrategy::kMixed) {
      return absl::InvalidArgumentError(
          StrCat(where, ".name: \"", r.name, "\" is a MIG profile resource, advertised only under ",
                 "flags.migStrategy mixed (it is \"", c.flags.mig_strategy, "\")"));
    }
    if (!mig_resource && r.name != c.resource_name) {
      return absl::InvalidArgumentError(
          StrCat(where, ".name: \"", r.name,
                 "\" is not a resource this agent advertises (resourceName is \"", c.resource_name,
                 "\"; under migStrategy mixed also ", kMigResourcePrefix, "<profile>)"));
    }
    if (absl::Status s = ValidateSharedDevices(r.devices, where); !s.ok()) return s;
    if (r.device_count < 0) {
      return absl::InvalidArgumentError(StrCat(where, ".devices: a count must be 1 or more"));
    }
    if (r.replicas < 2) {
      return absl::InvalidArgumentError(StrCat(
          where, ".replicas: ", r.replicas,
          " is too few; time-slicing needs at least 2 replicas (remove the entry to not share)"));
    }
    if (r.replicas > kMaxTimeSlicingReplicas) {
      return absl::InvalidArgumentError(
          StrCat(where, ".replicas: ", r.replicas, " is more than the ", kMaxTimeSlicingReplicas,
                 " a GPU may be shared by (each replica is a device the kubelet tracks)"));
    }
    if (!r.rename.empty()) {
      if (absl::Status s = ValidateExtendedResourceName(r.rename); !s.ok()) {
        return absl::InvalidArgumentError(StrCat(where, ".rename: ", s.message()));
      }
    }
    if (!names.insert(r.name).second) {
      return absl::InvalidArgumentError(StrCat(where, ".name: \"", r.name, "\" is listed twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDevices(const Config& c) { return ValidateDeviceSelection(c.devices); }

// dra.*: the driver name, the kubelet's folders, the pod UID.
absl::Status ValidateDra(const Config& c) {
  if (absl::Status s = ValidateDnsSubdomain(StrCat("dra.driverName \"", c.dra.driver_name, "\""),
                                            c.dra.driver_name);
      !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  // ResourceSlices and claims take a driver name of at most 63 characters
  // (resource.k8s.io's DriverNameMaxLength, as CSI's).
  if (c.dra.driver_name.size() > 63) {
    return absl::InvalidArgumentError(
        StrCat("dra.driverName \"", c.dra.driver_name, "\" is longer than 63 characters"));
  }
  for (const auto& [key, dir] :
       {std::pair<const char*, const std::string*>{"dra.registryDir", &c.dra.registry_dir},
        {"dra.pluginDir", &c.dra.plugin_dir}}) {
    if (dir->empty() || dir->front() != '/') {
      return absl::InvalidArgumentError(
          StrCat(key, ": \"", *dir, "\" must be an absolute path (a folder of the kubelet's)"));
    }
  }
  // A Kubernetes UID (a UUID), in socket and file names.
  if (c.dra.pod_uid.size() > 64 ||
      c.dra.pod_uid.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789-") != std::string::npos) {
    return absl::InvalidArgumentError(StrCat("dra.podUid \"", Printable(c.dra.pod_uid, 64),
                                             "\" is not a pod UID (letters, digits and '-', at "
                                             "most 64)"));
  }
  return absl::OkStatus();
}

// cdi.* and the CDI hooks' nvidia-ctk.
absl::Status ValidateCdi(const Config& c) {
  if (absl::Status s = cdi::ValidateVendor(c.cdi.vendor); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("cdi.vendor: ", s.message()));
  }
  if (absl::Status s = cdi::ValidateClass(c.cdi.class_name); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("cdi.class: ", s.message()));
  }
  if (!c.cdi.spec_dir.empty() && c.cdi.spec_dir.front() != '/') {
    return absl::InvalidArgumentError(
        StrCat("cdi.specDir: \"", c.cdi.spec_dir, "\" must be an absolute path (or empty)"));
  }
  if (c.mode == "dra" && c.cdi.spec_dir.empty()) {
    return absl::InvalidArgumentError(
        "cdi.specDir: empty, but DRA mode writes each prepared claim's CDI spec there (the "
        "container runtime's CDI folder, /var/run/cdi by default)");
  }
  if (!c.flags.plugin.nvidia_ctk_path.empty() && c.flags.plugin.nvidia_ctk_path.front() != '/') {
    return absl::InvalidArgumentError(
        StrCat("flags.plugin.nvidiaCTKPath: \"", c.flags.plugin.nvidia_ctk_path,
               "\" must be an absolute path on the host (or empty for no CDI hooks)"));
  }
  return absl::OkStatus();
}

// kubelet.* and metrics.address.
absl::Status ValidateKubelet(const Config& c) {
  if (absl::Status s = ValidateSocketFileName(c.kubelet.endpoint); !s.ok()) {
    return absl::InvalidArgumentError(
        StrCat("kubelet.endpoint: \"", Printable(c.kubelet.endpoint, 120), "\" ", s.message()));
  }
  if (c.kubelet.socket.empty() || c.kubelet.socket.front() != '/') {
    return absl::InvalidArgumentError(
        StrCat("kubelet.socket: \"", c.kubelet.socket, "\" must be an absolute path"));
  }
  if (!c.metrics.address.empty()) {
    if (absl::Status s = ValidateListenAddress(c.metrics.address); !s.ok()) return s;
  }
  if (c.kubelet.stream_grace_period < std::chrono::milliseconds(100) ||
      c.kubelet.stream_grace_period > std::chrono::minutes(5)) {
    return absl::InvalidArgumentError("kubelet.streamGracePeriod must be between 100ms and 5m");
  }
  return absl::OkStatus();
}

// driver.waitTimeout and health's timings.
absl::Status ValidateWaits(const Config& c) {
  if (c.driver.wait_timeout < Duration::zero() || c.driver.wait_timeout > std::chrono::hours(24)) {
    return absl::InvalidArgumentError("driver.waitTimeout must be between 0 and 24h");
  }
  if (c.health.event_wait_timeout < std::chrono::milliseconds(10) ||
      c.health.event_wait_timeout > std::chrono::minutes(1)) {
    return absl::InvalidArgumentError("health.eventWaitTimeout must be between 10ms and 1m");
  }
  if (c.health.poll_interval < std::chrono::seconds(1) ||
      c.health.poll_interval > std::chrono::hours(1)) {
    return absl::InvalidArgumentError("health.pollInterval must be between 1s and 1h");
  }
  return absl::OkStatus();
}

// nodeLabels.*
absl::Status ValidateNodeLabels(const Config& c) {
  if (c.agent_mode() != AgentMode::kStatic && c.node_labels.output == "node") {
    return absl::InvalidArgumentError(StrCat(
        "nodeLabels.output: \"node\" writes labels through the API server, which static mode "
        "does; in ",
        c.mode, " mode use \"nfd\" (a node-feature-discovery feature file) or \"none\""));
  }
  if (c.node_labels.Effective(c.agent_mode()) == LabelOutput::kNfd &&
      (c.node_labels.nfd_file.empty() || c.node_labels.nfd_file.front() != '/' ||
       c.node_labels.nfd_file.back() == '/')) {
    return absl::InvalidArgumentError(
        StrCat("nodeLabels.nfdFile: \"", c.node_labels.nfd_file,
               "\" must be an absolute file path (node-feature-discovery reads "
               "/etc/kubernetes/node-feature-discovery/features.d/<file>)"));
  }
  return absl::OkStatus();
}

// static.*
absl::Status ValidateStatic(const Config& c) {
  if (c.static_mode.resync_interval < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("static.resyncInterval must be at least 1s");
  }
  if (c.static_mode.watch_timeout < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("static.watchTimeout must be at least 1s");
  }
  return absl::OkStatus();
}

// apiServer.*: one way to reach it, and verification either on or off.
absl::Status ValidateApiServer(const Config& c) {
  if (!c.api_server.proxy.empty() && !c.api_server.server.empty()) {
    return absl::InvalidArgumentError(
        "apiServer.proxy and apiServer.server are both set; use one (proxy talks plain HTTP to "
        "kubectl proxy, server talks to the API server directly)");
  }
  if (c.api_server.insecure_skip_tls_verify && !c.api_server.certificate_authority.empty()) {
    return absl::InvalidArgumentError(
        "apiServer.insecureSkipTLSVerify and apiServer.certificateAuthority are both set; a CA is "
        "pointless when verification is off");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConfig(const Config& c) {
  // Section by section, in this order: the first error is the one said.
  for (absl::Status (*check)(const Config&) :
       {ValidateNames, ValidateTimeSlicing, ValidateDevices, ValidateDra, ValidateCdi,
        ValidateKubelet, ValidateWaits, ValidateNodeLabels, ValidateNodeConfigSettings,
        ValidateStatic, ValidateApiServer}) {
    if (absl::Status s = check(c); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace gpu_agent
