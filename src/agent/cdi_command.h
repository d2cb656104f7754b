// `gpu-agent cdi generate`, and the CDI spec file plugin mode keeps in
// cdi.specDir while a cdi-* device-list strategy is on.
#ifndef GPU_AGENT_AGENT_CDI_COMMAND_H_
#define GPU_AGENT_AGENT_CDI_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "agent/config_loader.h"
#include "nvml/inventory.h"

namespace gpu_agent {

// Prints the spec (`output` empty or "-") or writes it to `output`
// atomically. `format` "json", "yaml" or empty: from the output file's
// extension, else yaml. Returns the exit code.
int CdiGenerateCommand(const LoadedConfig& loaded, const std::string& format,
                       const std::string& output);

// The spec file this process wrote. Not thread-safe; plugin mode calls it
// from its main thread only.
class CdiSpecFile {
 public:
  CdiSpecFile() = default;
  ~CdiSpecFile() { Remove(); }  // every way out of plugin mode removes it
  CdiSpecFile(const CdiSpecFile&) = delete;
  CdiSpecFile& operator=(const CdiSpecFile&) = delete;

  // With a cdi-* strategy on, cdi.specDir set and GPUs in `inventory`:
  // writes <specDir>/<vendor>-<class>.json atomically (creating the folder),
  // removing the file it wrote before under another name. Otherwise removes
  // the file it wrote, if any. Errors name the setting and the file.
  absl::Status Update(const Config& config, const nvml::Inventory& inventory);
  // Removes the file this process wrote, if any (never one it did not).
  void Remove();
  const std::string& path() const { return path_; }

 private:
  std::string path_;  // empty: none written
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CDI_COMMAND_H_
