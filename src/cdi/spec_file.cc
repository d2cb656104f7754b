#include "cdi/spec_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::cdi {

absl::Status SpecFile::Write(const Spec& spec, const std::string& dir, const std::string& setting) {
  // Container runtimes read the folder (0755); no other user may write it.
  if (absl::Status s = MakeTrustedFolder(dir, 0755, setting); !s.ok()) return s;
  const std::string path = StrCat(dir, "/", SpecFileName(spec.kind, "json"));
  if (absl::Status s = WriteFileAtomically(path, RenderJson(spec)); !s.ok()) {
    return absl::Status(s.code(), StrCat(setting, ": ", s.message()));
  }
  if (!path_.empty() && path_ != path) Remove();
  path_ = path;
  LogInfo("CDI spec written",
          {{"path", path_}, {"kind", spec.kind}, {"devices", StrCat(spec.devices.size())}});
  return absl::OkStatus();
}

void SpecFile::Remove() {
  if (path_.empty()) return;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    LogWarning("cannot remove the CDI spec", {{"path", path_}, {"error", std::strerror(errno)}});
  } else {
    LogInfo("CDI spec removed", {{"path", path_}});
  }
  path_.clear();
}

}  // namespace gpu_agent::cdi
