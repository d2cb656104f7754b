#include "agent/cli/cdi_command.h"

#include <cstdio>

#include "agent/plan/generation.h"
#include "base/exit_code.h"
#include "base/file_util.h"
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
  // The spec of the generation `run` would build, from the same device
  // model, so the names it holds are those Allocate and DRA's prepare give.
  GenerationOptions options;
  options.plan = GenerationOptions::Plan::kNone;
  options.cdi = GenerationOptions::Cdi::kAlways;
  absl::StatusOr<std::shared_ptr<const Generation>> built = DiscoverGeneration(loaded, options);
  if (!built.ok()) {
    std::fprintf(stderr, "gpu-agent: %s\n", std::string(built.status().message()).c_str());
    return ExitCodeFor(built.status());
  }
  for (const std::string& note : (*built)->warnings) {
    std::fprintf(stderr, "gpu-agent: note: %s\n", note.c_str());
  }
  const cdi::Generated* gen = &*(*built)->cdi;
  const std::string text = fmt == "json" ? cdi::RenderJson(gen->spec) : cdi::RenderYaml(gen->spec);
  if (to_stdout) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
  }
  if (absl::Status s = WriteFileAtomically(output, text); !s.ok()) return Fail(s);
  std::fprintf(stderr, "gpu-agent: wrote the CDI spec for %s (%zu devices) to %s\n",
               gen->spec.kind.c_str(), gen->spec.devices.size(), output.c_str());
  return kExitOk;
}

}  // namespace gpu_agent
