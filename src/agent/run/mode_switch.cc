#include "agent/run/mode_switch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/config/api_connection.h"
#include "agent/plan/dra_plan.h"
#include "apiserver/discovery.h"
#include "apiserver/json_patch.h"
#include "apiserver/node_client.h"
#include "apiserver/rest_client.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"
#include "podresources/pod_resources.h"

namespace gpu_agent {
namespace {

// How long the switch's read of PodResources may take.
constexpr std::chrono::seconds kPodResourcesWait{2};

absl::Status CanServeDra(const Config& c) {
  if (DraPoolName(c).empty()) {
    return absl::FailedPreconditionError(
        "DRA mode needs this node's name (NODE_NAME or --node-name), the name of its "
        "ResourceSlice pool");
  }
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(c);
  if (!conn.ok()) return absl::FailedPreconditionError(conn.status().message());
  absl::StatusOr<std::unique_ptr<apiserver::RestClient>> rest =
      apiserver::RestClient::Create(*conn, RestOptionsFor(c));
  if (!rest.ok()) return absl::FailedPreconditionError(rest.status().message());
  absl::StatusOr<std::string> version = apiserver::DiscoverResourceApiVersion(rest->get());
  if (!version.ok()) {
    return absl::FailedPreconditionError(
        StrCat("the API server cannot serve DRA: ", version.status().message()));
  }
  return absl::OkStatus();
}

absl::Status CanServePlugin(const Config& c) {
  struct stat st;
  if (::stat(c.kubelet.socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        StrCat("the kubelet serves no device-plugin registration at ", c.kubelet.socket,
               " (kubelet.socket; device plugins off, or another kubelet root?)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CanServe(const Generation& next) {
  const Config& c = next.config();
  switch (c.agent_mode()) {
    case AgentMode::kDra:
      return CanServeDra(c);
    case AgentMode::kPlugin:
      return CanServePlugin(c);
    case AgentMode::kStatic:
      break;
  }
  return absl::OkStatus();
}

absl::Status ReleaseAllocatable(const Config& config, const std::vector<std::string>& resources) {
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  if (!conn.ok()) return conn.status();
  absl::StatusOr<std::unique_ptr<apiserver::RestClient>> rest =
      apiserver::RestClient::Create(*conn, RestOptionsFor(config));
  if (!rest.ok()) return rest.status();
  apiserver::JsonPatch patch;
  for (const std::string& r : resources) {
    patch.Add(apiserver::JsonPointer({"status", "allocatable", r}), "0");
  }
  apiserver::NodeClient node(rest->get(), config.node_name);
  absl::StatusOr<apiserver::NodeView> patched = node.PatchStatus(patch);
  return patched.ok() ? absl::OkStatus() : patched.status();
}

absl::Status CanSwitch(const Generation& running, const Generation& next) {
  const Config& a = running.config();
  const Config& b = next.config();
  struct Setting {
    const char* name;
    const std::string& before;
    const std::string& after;
  };
  const Setting settings[] = {{"dra.driverName", a.dra.driver_name, b.dra.driver_name},
                              {"dra.pluginDir", a.dra.plugin_dir, b.dra.plugin_dir},
                              {"dra.registryDir", a.dra.registry_dir, b.dra.registry_dir},
                              {"cdi.specDir", a.cdi.spec_dir, b.cdi.spec_dir},
                              {"cdi.vendor", a.cdi.vendor, b.cdi.vendor}};
  for (const Setting& s : settings) {
    if (s.before != s.after) {
      return absl::FailedPreconditionError(
          StrCat(s.name, " is \"", s.before, "\" in the running config and \"", s.after,
                 "\" in the next: both modes must agree on it, where DRA's claims and the "
                 "record of the move are kept"));
    }
  }
  if (absl::Status s = CanServe(next); !s.ok()) return s;
  if (a.agent_mode() == AgentMode::kPlugin && b.agent_mode() == AgentMode::kDra) {
    // DRA keeps out of its slices the GPUs running pods hold through the
    // device plugin, which only the kubelet's PodResources tells: while it
    // cannot be read, the device plugin keeps the node.
    absl::StatusOr<podresources::PodResources> held =
        podresources::List(b.kubelet.pod_resources_socket, kPodResourcesWait);
    if (!held.ok()) {
      return absl::UnavailableError(
          StrCat("cannot tell which GPUs running pods hold through the device plugin (",
                 held.status().message(), "; kubelet.podResourcesSocket)"));
    }
  }
  return absl::OkStatus();
}

std::string HandoverRecordPath(const Config& config) {
  return StrCat(config.dra.plugin_dir, "/", config.dra.driver_name, "/handover");
}

bool HandoverRecorded(const Config& config) { return PathExists(HandoverRecordPath(config)); }

absl::Status RecordHandover(const Config& config, const std::string& from) {
  const std::string folder = StrCat(config.dra.plugin_dir, "/", config.dra.driver_name);
  if (::mkdir(folder.c_str(), 0750) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        StrCat("cannot create ", folder, ": ", std::strerror(errno)));
  }
  return WriteFileAtomically(HandoverRecordPath(config),
                             StrCat("from ", from, " mode: GPUs its pods hold stay out of DRA\n"),
                             Durability::kFlushed, 0640);
}

void EndHandoverRecord(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    LogWarning("cannot remove the handover record",
               {{"file", path}, {"error", std::strerror(errno)}});
  }
}

}  // namespace gpu_agent
