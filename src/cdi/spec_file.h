// The CDI spec file a process keeps in a spec folder (/var/run/cdi) while it
// serves devices by CDI name: written atomically, replaced when the spec
// changes, removed on every way out but a handover (Keep).
#ifndef GPU_AGENT_CDI_SPEC_FILE_H_
#define GPU_AGENT_CDI_SPEC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "cdi/spec.h"

namespace gpu_agent::cdi {

// The spec file this process wrote. Not thread-safe: one owner calls it.
class SpecFile {
 public:
  SpecFile() = default;
  ~SpecFile() { Remove(); }
  SpecFile(const SpecFile&) = delete;
  SpecFile& operator=(const SpecFile&) = delete;

  // Writes `spec` as <dir>/<vendor>-<class>.json atomically (creating the
  // folder), then removes the file it wrote before under another name.
  // Errors name `setting` (the folder's setting, e.g. "cdi.specDir") and the
  // file; on an error the file written before stays.
  absl::Status Write(const Spec& spec, const std::string& dir, const std::string& setting);
  // Removes the file this process wrote, if any (never one it did not).
  void Remove();
  // Leaves the file in place, for whoever serves its devices next (running
  // containers that restart resolve their CDI names through it); this
  // object forgets it.
  void Keep() { path_.clear(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;  // empty: none written
};

}  // namespace gpu_agent::cdi

#endif  // GPU_AGENT_CDI_SPEC_FILE_H_
