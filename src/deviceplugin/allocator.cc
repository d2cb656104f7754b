#include "deviceplugin/allocator.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <unordered_set>

#include "base/file_util.h"
#include "base/strings.h"

namespace gpu_agent::deviceplugin {
std::string ListIds(const std::vector<std::string>& ids, size_t max) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < max; ++i) {
    StrAppend(&out, i ? ", " : "", "\"", ids[i], "\"");
  }
  if (ids.size() > max) StrAppend(&out, " and ", ids.size() - max, " more");
  return out;
}

Allocator::Allocator(AllocateOptions options) : options_(std::move(options)) {
  dev_root_ = TrimRoot(options_.dev_root);
  dev_root_here_ =
      TrimRoot(options_.dev_root_here.empty() ? options_.dev_root : options_.dev_root_here);
  if (options_.pass_device_specs) {
    for (const char* node :
         {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
      if (PathExists(JoinRoot(dev_root_here_, node))) control_nodes_.emplace_back(node);
    }
  }
}

std::string Allocator::CdiAnnotationKey(const std::string& resource,
                                        const v1beta1::ContainerAllocateRequest& request) const {
  // The kubelet merges the annotations of every resource a container asks
  // for and keeps the first of two with the same key, so each response needs
  // its own: a hash of the resource and the IDs asked, as NVIDIA's plugin
  // adds a response id. Deterministic, so a retried Allocate answers alike.
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xFF) * 1099511628211ull;  // separator
  };
  mix(resource);
  for (const std::string& id : request.devices_ids()) mix(id);
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(h));
  // The key's name part is at most 63 characters: cut the class to fit.
  std::string cls = options_.cdi_kind.substr(options_.cdi_kind.find('/') + 1);
  constexpr size_t kFixed = sizeof("gpu-agent_") - 1 + 1 + 16;
  if (cls.size() > 63 - kFixed) cls.resize(63 - kFixed);
  return StrCat(options_.cdi_annotation_prefix, "gpu-agent_", cls, "_", id);
}

std::optional<DeviceListStrategies> DeviceListStrategies::Parse(
    const std::vector<std::string>& names) {
  DeviceListStrategies out;
  out.envvar = false;
  for (const std::string& n : names) {
    if (n == "envvar") {
      out.envvar = true;
    } else if (n == "volume-mounts") {
      out.volume_mounts = true;
    } else if (n == "cdi-annotations") {
      out.cdi_annotations = true;
    } else if (n == "cdi-cri") {
      out.cdi_cri = true;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::string Allocator::HostPath(const std::string& dev_path) const {
  return JoinRoot(dev_root_, dev_path);
}

absl::Status Allocator::AllocateContainer(const DeviceSnapshot& snap,
                                          const v1beta1::ContainerAllocateRequest& request,
                                          v1beta1::ContainerAllocateResponse* out) const {
  const auto& ids = request.devices_ids();
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        StrCat("the container request names no device IDs (resource ", snap.resource_name, ")"));
  }
  if (snap.replicated && options_.fail_requests_greater_than_one && ids.size() > 1) {
    return absl::InvalidArgumentError(
        StrCat("request for ", ids.size(), " shared ", snap.resource_name, " devices (",
               ListIds({ids.begin(), ids.end()}),
               ") refused: sharing.timeSlicing.failRequestsGreaterThanOne allows one replica per "
               "container"));
  }
  std::vector<const PluginDevice*> devices;
  devices.reserve(static_cast<size_t>(ids.size()));
  std::vector<std::string> unknown, unhealthy, duplicate;
  std::unordered_set<std::string_view> seen;
  seen.reserve(static_cast<size_t>(ids.size()));
  for (const std::string& id : ids) {
    if (!seen.insert(id).second) {
      duplicate.push_back(id);
      continue;
    }
    const PluginDevice* d = snap.Find(id);
    if (d == nullptr) {
      unknown.push_back(id);
    } else if (!d->healthy) {
      unhealthy.push_back(id);
    } else {
      devices.push_back(d);
    }
  }
  if (!unknown.empty() || !unhealthy.empty() || !duplicate.empty()) {
    std::string msg = StrCat("cannot allocate ", snap.resource_name, ":");
    if (!unknown.empty()) StrAppend(&msg, " unknown device IDs ", ListIds(unknown), ";");
    if (!unhealthy.empty()) StrAppend(&msg, " unhealthy device IDs ", ListIds(unhealthy), ";");
    if (!duplicate.empty()) StrAppend(&msg, " duplicate device IDs ", ListIds(duplicate), ";");
    msg.pop_back();
    return absl::InvalidArgumentError(msg);
  }

  // The runtime sees each physical GPU once, however many replicas were asked.
  std::vector<const PluginDevice*> gpus;
  {
    std::unordered_set<std::string_view> gpu_seen;
    for (const PluginDevice* d : devices) {
      if (gpu_seen.insert(d->gpu_id).second) gpus.push_back(d);
    }
  }
  std::vector<std::string> gpu_ids;
  gpu_ids.reserve(gpus.size());
  for (const PluginDevice* d : gpus) gpu_ids.push_back(d->gpu_id);

  auto& envs = *out->mutable_envs();
  const DeviceListStrategies& list = options_.device_list;
  if (list.envvar) envs[kVisibleDevicesEnv] = StrJoin(gpu_ids, ",");
  if (list.volume_mounts) {
    envs[kVisibleDevicesEnv] = kVolumeMountRoot;
    for (const std::string& id : gpu_ids) {
      v1beta1::Mount* m = out->add_mounts();
      m->set_host_path("/dev/null");
      m->set_container_path(StrCat(kVolumeMountRoot, "/", id));
    }
  }
  if (list.Cdi()) {
    std::vector<std::string> names;
    names.reserve(gpu_ids.size());
    for (const std::string& id : gpu_ids) names.push_back(StrCat(options_.cdi_kind, "=", id));
    if (list.cdi_annotations) {
      (*out->mutable_annotations())[CdiAnnotationKey(snap.resource_name, request)] =
          StrJoin(names, ",");
    }
    if (list.cdi_cri) {
      for (const std::string& name : names) out->add_cdi_devices()->set_name(name);
    }
  }
  if (options_.pass_device_specs) {
    std::unordered_set<std::string_view> added;  // MIG devices share their parent's node
    auto add_spec = [&](const std::string& path) {
      if (!added.insert(path).second) return;
      v1beta1::DeviceSpec* spec = out->add_devices();
      spec->set_container_path(path);
      spec->set_host_path(HostPath(path));
      spec->set_permissions("rw");
    };
    for (const std::string& node : control_nodes_) add_spec(node);
    for (const PluginDevice* d : gpus) {
      for (const std::string& node : d->device_nodes) add_spec(node);
    }
  }
  return absl::OkStatus();
}

}  // namespace gpu_agent::deviceplugin
