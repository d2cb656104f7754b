#include "agent/cdi_generator.h"

#include <algorithm>
#include <optional>
#include <set>

#include "agent/device_selection.h"
#include "agent/driver_files.h"
#include "base/file_util.h"
#include "base/strings.h"
#include "nvml/mig_minors.h"

namespace gpu_agent {
namespace {

using deviceplugin::cdi::ContainerEdits;
using deviceplugin::cdi::Device;
using deviceplugin::cdi::DeviceNode;
using deviceplugin::cdi::Hook;
using deviceplugin::cdi::Mount;

// The options NVIDIA's generator gives driver files and sockets.
const std::vector<std::string>& FileOptions() {
  static const auto* o = new std::vector<std::string>{"ro", "nosuid", "nodev", "bind"};
  return *o;
}
const std::vector<std::string>& SocketOptions() {
  static const auto* o = new std::vector<std::string>{"ro", "nosuid", "nodev", "bind", "noexec"};
  return *o;
}

std::string TrimRoot(std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

class Generator {
 public:
  Generator(const Config& c, const nvml::Inventory& inv) : c_(c), inv_(inv) {}

  absl::StatusOr<CdiGenerated> Run() {
    out_.spec.kind = c_.cdi.Kind();
    if (inv_.driver_version.empty()) {
      return absl::FailedPreconditionError(
          "NVML reported no driver version, which the driver's files are found by");
    }
    absl::StatusOr<GpuChoice> choice = ChooseGpus(c_.devices, inv_.gpus);
    if (!choice.ok()) return choice.status();
    std::vector<DeviceNode> every;  // for "all"
    for (size_t pos : choice->chosen) {
      if (absl::Status s = AddGpu(inv_.gpus[pos], &every); !s.ok()) return s;
    }
    if (out_.spec.devices.empty()) {
      return absl::NotFoundError(
          StrCat("no GPU is exposed on this node (NVML lists ", inv_.gpus.size(),
                 "; see devices.include/exclude/max): a CDI spec needs at least one device"));
    }
    out_.spec.devices.push_back(Device{"all", {{}, every, {}, {}}});
    if (absl::Status s = AddDriver(); !s.ok()) return s;
    if (absl::Status s = deviceplugin::cdi::ValidateSpec(out_.spec); !s.ok()) return s;
    return std::move(out_);
  }

 private:
  // A node as the runtime opens it (host path under the dev root), after
  // checking it is there where this process sees the dev root.
  absl::StatusOr<DeviceNode> Node(const std::string& path, const std::string& what) const {
    const std::string here = JoinRoot(c_.flags.DevRootHere(), path);
    if (!PathExists(here)) {
      return absl::NotFoundError(StrCat(what, ": device node ", path, " is not under the dev root ",
                                        c_.flags.nvidia_dev_root, " (looked at ", here, ")"));
    }
    return DeviceNode{path, JoinRoot(c_.flags.nvidia_dev_root, path)};
  }

  void AddDevice(std::string name, const std::vector<DeviceNode>& nodes,
                 std::vector<DeviceNode>* every) {
    for (const DeviceNode& n : nodes) {
      auto same = [&](const DeviceNode& o) { return o.path == n.path; };
      if (std::none_of(every->begin(), every->end(), same)) every->push_back(n);
    }
    out_.spec.devices.push_back(Device{std::move(name), {{}, nodes, {}, {}}});
  }

  absl::Status AddGpu(const nvml::GpuRecord& g, std::vector<DeviceNode>* every) {
    if (g.uuid.empty()) return absl::OkStatus();  // not advertised either
    const std::string what = StrCat("GPU ", g.index, " (", g.uuid, ")");
    if (g.minor < 0) {
      out_.notes.push_back(StrCat(what, " has no device minor",
                                  g.error.empty() ? "" : StrCat(" (", g.error, ")"),
                                  ": left out of the CDI spec"));
      return absl::OkStatus();
    }
    absl::StatusOr<DeviceNode> node = Node(StrCat("/dev/nvidia", g.minor), what);
    if (!node.ok()) return node.status();
    if (c_.flags.mig_strategy == "none" || !g.mig_enabled) {
      AddDevice(g.uuid, {*node}, every);
      AddDevice(StrCat(g.index), {*node}, every);
      return absl::OkStatus();
    }
    for (const nvml::MigRecord& m : g.mig_devices) {
      if (m.uuid.empty()) continue;
      const std::string mig = StrCat("MIG device ", g.index, ":", m.index, " (", m.uuid, ")");
      if (!minors_) {
        absl::StatusOr<nvml::MigMinors> read = nvml::MigMinors::Read(c_.proc_root);
        if (!read.ok()) {
          return absl::Status(read.status().code(),
                              StrCat(mig, " needs its capability device nodes, listed in ",
                                     "mig-minors: ", read.status().message()));
        }
        minors_ = *std::move(read);
      }
      absl::StatusOr<std::vector<std::string>> caps = minors_->DeviceNodes(
          g.minor, static_cast<int>(m.gpu_instance_id), static_cast<int>(m.compute_instance_id));
      if (!caps.ok())
        return absl::Status(caps.status().code(), StrCat(mig, ": ", caps.status().message()));
      std::vector<DeviceNode> nodes = {*node};
      for (const std::string& cap : *caps) {
        absl::StatusOr<DeviceNode> n = Node(cap, mig);
        if (!n.ok()) return n.status();
        nodes.push_back(*n);
      }
      AddDevice(m.uuid, nodes, every);
      AddDevice(StrCat(g.index, ":", m.index), nodes, every);
    }
    return absl::OkStatus();
  }

  // Where this process can check the host's nvidia-ctk: the hook runs on
  // the host, so its path is a host path. Empty when it cannot be seen.
  std::optional<std::string> HookToolHere() const {
    const std::string& tool = c_.flags.plugin.nvidia_ctk_path;
    if (c_.flags.plugin.container_driver_root.empty()) return tool;
    // In a container, the host's root is visible only when it is the
    // driver root that is mounted.
    if (TrimRoot(c_.flags.nvidia_driver_root) == "/") {
      return JoinRoot(c_.flags.plugin.container_driver_root, tool);
    }
    return std::nullopt;
  }

  Hook MakeHook(const std::string& name, std::vector<std::string> args) const {
    const std::string& tool = c_.flags.plugin.nvidia_ctk_path;
    const std::string base = tool.substr(tool.rfind('/') + 1);
    // nvidia-cdi-hook takes the hook as its first argument, nvidia-ctk
    // under "hook" (NVIDIA's pkg/nvcdi hooks.go).
    std::vector<std::string> argv = {base};
    if (base != "nvidia-cdi-hook") argv.push_back("hook");
    argv.push_back(name);
    argv.insert(argv.end(), args.begin(), args.end());
    return Hook{"createContainer", tool, std::move(argv)};
  }

  absl::Status AddDriver() {
    absl::StatusOr<DriverFiles> files =
        FindDriverFiles(c_.flags.DriverRootHere(), inv_.driver_version);
    if (!files.ok()) return files.status();
    ContainerEdits& e = out_.spec.edits;
    // A legacy NVIDIA runtime hook must not add every GPU on top (as
    // NVIDIA's own specs say).
    e.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
    for (const char* control :
         {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
      absl::StatusOr<DeviceNode> n = Node(control, "the driver");
      if (n.ok()) {
        e.device_nodes.push_back(*n);
      } else if (std::string_view(control) == "/dev/nvidiactl") {
        return n.status();  // every CUDA and NVML client opens it
      }
    }
    const std::string& root = c_.flags.nvidia_driver_root;
    auto mount = [&](const std::string& host_file, const std::string& at,
                     const std::vector<std::string>& options) {
      e.mounts.push_back(Mount{JoinRoot(root, host_file), at, options});
    };
    std::optional<std::string> tool_here;
    if (!c_.flags.plugin.nvidia_ctk_path.empty()) tool_here = HookToolHere();
    const bool hooks = tool_here && PathExists(*tool_here);
    if (!c_.flags.plugin.nvidia_ctk_path.empty() && !hooks) {
      out_.notes.push_back(StrCat(
          "no CDI hooks: ", c_.flags.plugin.nvidia_ctk_path,
          tool_here ? StrCat(" is not there (looked at ", *tool_here, ")")
                    : std::string(" cannot be checked from this container (the host's root is "
                                  "not the mounted driver root)"),
          "; the library links are mounted instead and the container's loader cache is not "
          "updated"));
    }
    // flags.plugin.cdiDisableHooks leaves hooks out one by one; what a
    // left-out create-symlinks would have made is mounted instead.
    auto disabled = [&](std::string_view hook) {
      const std::vector<std::string>& off = c_.flags.plugin.cdi_disable_hooks;
      return std::find(off.begin(), off.end(), "all") != off.end() ||
             std::find(off.begin(), off.end(), hook) != off.end();
    };
    const bool link_hook = hooks && !disabled("create-symlinks");
    const bool ldcache_hook = hooks && !disabled("update-ldcache");
    std::vector<std::string> links;
    for (const DriverLibrary& lib : files->libraries) {
      mount(lib.path, lib.path, FileOptions());
      for (const std::string& link : lib.links) {
        if (link_hook) {
          links.push_back("--link");
          links.push_back(StrCat(lib.path.substr(lib.path.rfind('/') + 1), "::", link));
        } else {
          mount(lib.path, link, FileOptions());  // the file itself under the link's name
        }
      }
    }
    for (const std::string& bin : files->binaries) mount(bin, bin, FileOptions());
    for (const std::string& fw : files->firmware) mount(fw, fw, FileOptions());
    for (const std::string& socket : files->sockets) mount(socket, socket, SocketOptions());
    if (link_hook && !links.empty()) e.hooks.push_back(MakeHook("create-symlinks", links));
    if (ldcache_hook) {
      std::vector<std::string> folders;
      for (const std::string& f : files->library_folders) {
        folders.push_back("--folder");
        folders.push_back(f);
      }
      e.hooks.push_back(MakeHook("update-ldcache", folders));
    }
    return absl::OkStatus();
  }

  const Config& c_;
  const nvml::Inventory& inv_;
  std::optional<nvml::MigMinors> minors_;
  CdiGenerated out_;
};

}  // namespace

bool CdiStrategyOn(const Config& config) {
  for (const std::string& s : config.flags.plugin.device_list_strategy) {
    if (s == "cdi-annotations" || s == "cdi-cri") return true;
  }
  return false;
}

absl::StatusOr<CdiGenerated> GenerateCdiSpec(const Config& config,
                                             const nvml::Inventory& inventory) {
  return Generator(config, inventory).Run();
}

}  // namespace gpu_agent
