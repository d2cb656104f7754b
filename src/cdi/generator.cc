#include "cdi/generator.h"

#include <algorithm>
#include <optional>
#include <set>

#include "base/file_util.h"
#include "base/strings.h"
#include "cdi/driver_files.h"

namespace gpu_agent::cdi {
namespace {

// The options NVIDIA's generator gives driver files and sockets.
const std::vector<std::string>& FileOptions() {
  static const auto* o = new std::vector<std::string>{"ro", "nosuid", "nodev", "bind"};
  return *o;
}
const std::vector<std::string>& SocketOptions() {
  static const auto* o = new std::vector<std::string>{"ro", "nosuid", "nodev", "bind", "noexec"};
  return *o;
}

class Generator {
 public:
  explicit Generator(const GeneratorInput& in) : in_(in) {}

  absl::StatusOr<Generated> Run() {
    out_.spec.kind = in_.kind;
    if (in_.driver_version.empty()) {
      return absl::FailedPreconditionError(
          "NVML reported no driver version, which the driver's files are found by");
    }
    if (in_.devices.empty()) {
      return absl::NotFoundError(
          StrCat("no GPU is exposed on this node (NVML lists ", in_.gpus_listed,
                 "; see devices.include/exclude/max): a CDI spec needs at least one device"));
    }
    std::vector<DeviceNode> every;  // for "all"
    for (const DeviceEntry& d : in_.devices) {
      std::vector<DeviceNode> nodes;
      for (const std::string& path : d.device_nodes) {
        absl::StatusOr<DeviceNode> n = Node(path, d.what);
        if (!n.ok()) return n.status();
        nodes.push_back(*n);
      }
      for (const DeviceNode& n : nodes) {
        auto same = [&](const DeviceNode& o) { return o.path == n.path; };
        if (std::none_of(every.begin(), every.end(), same)) every.push_back(n);
      }
      for (const std::string& name : d.names) {
        out_.spec.devices.push_back(Device{name, {{}, nodes, {}, {}}});
      }
    }
    out_.spec.devices.push_back(Device{"all", {{}, every, {}, {}}});
    if (absl::Status s = AddDriver(); !s.ok()) return s;
    if (absl::Status s = ValidateSpec(out_.spec); !s.ok()) return s;
    return std::move(out_);
  }

 private:
  // A node as the runtime opens it (host path under the dev root), after
  // checking it is there where this process sees the dev root.
  absl::StatusOr<DeviceNode> Node(const std::string& path, const std::string& what) const {
    const std::string here = JoinRoot(in_.dev_root_here, path);
    if (!PathExists(here)) {
      return absl::NotFoundError(StrCat(what, ": device node ", path, " is not under the dev root ",
                                        in_.dev_root, " (looked at ", here, ")"));
    }
    return DeviceNode{path, JoinRoot(in_.dev_root, path)};
  }

  // Where this process can check the host's nvidia-ctk: the hook runs on
  // the host, so its path is a host path. Empty when it cannot be seen.
  std::optional<std::string> HookToolHere() const {
    const std::string& tool = in_.hook_tool;
    if (in_.container_driver_root.empty()) return tool;
    // In a container, the host's root is visible only when it is the
    // driver root that is mounted.
    if (TrimRoot(in_.driver_root) == "/") return JoinRoot(in_.container_driver_root, tool);
    return std::nullopt;
  }

  Hook MakeHook(const std::string& name, std::vector<std::string> args) const {
    const std::string& tool = in_.hook_tool;
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
        FindDriverFiles(in_.driver_root_here, in_.driver_version, in_.library_folders);
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
    const std::string& root = in_.driver_root;
    auto mount = [&](const std::string& host_file, const std::string& at,
                     const std::vector<std::string>& options) {
      e.mounts.push_back(Mount{JoinRoot(root, host_file), at, options});
    };
    std::optional<std::string> tool_here;
    if (!in_.hook_tool.empty()) tool_here = HookToolHere();
    const bool hooks = tool_here && PathExists(*tool_here);
    if (!in_.hook_tool.empty() && !hooks) {
      out_.notes.push_back(StrCat(
          "no CDI hooks: ", in_.hook_tool,
          tool_here ? StrCat(" is not there (looked at ", *tool_here, ")")
                    : std::string(" cannot be checked from this container (the host's root is "
                                  "not the mounted driver root)"),
          "; the library links are mounted instead and the container's loader cache is not "
          "updated"));
    }
    // Hooks left out one by one; what a left-out create-symlinks would have
    // made is mounted instead.
    auto disabled = [&](std::string_view hook) {
      const std::vector<std::string>& off = in_.disabled_hooks;
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

  const GeneratorInput& in_;
  Generated out_;
};

}  // namespace

absl::StatusOr<Generated> Generate(const GeneratorInput& input) { return Generator(input).Run(); }

}  // namespace gpu_agent::cdi
