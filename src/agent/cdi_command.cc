#include "agent/cdi_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "agent/cdi_generator.h"
#include "agent/exit_code.h"
#include "agent/nvml_start.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

std::string FormatFromExtension(const std::string& file) {
  if (file.ends_with(".json")) return "json";
  if (file.ends_with(".yaml") || file.ends_with(".yml")) return "yaml";
  return "";
}

int FailText(const std::string& message) {
  std::fprintf(stderr, "gpu-agent: %s\n", message.c_str());
  return kExitFailure;
}
int Fail(const absl::Status& s) { return FailText(std::string(s.message())); }

}  // namespace

int CdiGenerateCommand(const LoadedConfig& loaded, const std::string& format,
                       const std::string& output) {
  const bool to_stdout = output.empty() || output == "-";
  const std::string from_ext = to_stdout ? "" : FormatFromExtension(output);
  if (!format.empty() && !from_ext.empty() && format != from_ext) {
    std::fprintf(stderr,
                 "gpu-agent: --output %s contradicts --output-file %s (CDI consumers read a "
                 "spec by its extension, .json or .yaml)\n",
                 format.c_str(), output.c_str());
    return kExitUsage;
  }
  const std::string fmt = !format.empty() ? format : !from_ext.empty() ? from_ext : "yaml";
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib = StartNvml(loaded.config);
  if (!lib.ok()) return Fail(lib.status());
  absl::StatusOr<nvml::Inventory> inv = nvml::DiscoverInventory(**lib, loaded.config.sysfs_root);
  if (!inv.ok()) return Fail(inv.status());
  absl::StatusOr<CdiGenerated> gen = GenerateCdiSpec(loaded.config, *inv);
  if (!gen.ok()) return FailText(StrCat("cannot generate the CDI spec: ", gen.status().message()));
  for (const std::string& note : gen->notes) {
    std::fprintf(stderr, "gpu-agent: note: %s\n", note.c_str());
  }
  const std::string text = fmt == "json" ? deviceplugin::cdi::RenderJson(gen->spec)
                                         : deviceplugin::cdi::RenderYaml(gen->spec);
  if (to_stdout) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
  }
  if (absl::Status s = WriteFileAtomically(output, text); !s.ok()) return Fail(s);
  std::fprintf(stderr, "gpu-agent: wrote the CDI spec for %s (%zu devices) to %s\n",
               gen->spec.kind.c_str(), gen->spec.devices.size(), output.c_str());
  return kExitOk;
}

absl::Status CdiSpecFile::Update(const Config& config, const nvml::Inventory& inventory) {
  if (!CdiStrategyOn(config) || config.cdi.spec_dir.empty() || inventory.gpus.empty()) {
    if (CdiStrategyOn(config)) {
      LogInfo(config.cdi.spec_dir.empty()
                  ? "cdi.specDir is empty: no CDI spec written; another tool must define the "
                    "devices Allocate names"
                  : "no GPUs: no CDI spec written",
              {{"kind", config.cdi.Kind()}});
    }
    Remove();
    return absl::OkStatus();
  }
  absl::StatusOr<CdiGenerated> gen = GenerateCdiSpec(config, inventory);
  if (!gen.ok()) {
    return absl::Status(gen.status().code(),
                        StrCat("cannot generate the CDI spec: ", gen.status().message()));
  }
  for (const std::string& note : gen->notes) LogWarning(note);
  std::error_code ec;
  std::filesystem::create_directories(config.cdi.spec_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        StrCat("cdi.specDir: cannot create ", config.cdi.spec_dir, ": ", ec.message()));
  }
  const std::string path =
      StrCat(config.cdi.spec_dir, "/", deviceplugin::cdi::SpecFileName(gen->spec.kind, "json"));
  if (absl::Status s = WriteFileAtomically(path, deviceplugin::cdi::RenderJson(gen->spec));
      !s.ok()) {
    return absl::Status(s.code(), StrCat("cdi.specDir: ", s.message()));
  }
  if (!path_.empty() && path_ != path) Remove();
  path_ = path;
  LogInfo(
      "CDI spec written",
      {{"path", path_}, {"kind", gen->spec.kind}, {"devices", StrCat(gen->spec.devices.size())}});
  return absl::OkStatus();
}

void CdiSpecFile::Remove() {
  if (path_.empty()) return;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    LogWarning("cannot remove the CDI spec", {{"path", path_}, {"error", std::strerror(errno)}});
  } else {
    LogInfo("CDI spec removed", {{"path", path_}});
  }
  path_.clear();
}

}  // namespace gpu_agent
